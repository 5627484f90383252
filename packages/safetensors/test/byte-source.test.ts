import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  MAX_OBJECT_STAMP_CHARS,
  OBJECT_STAMP_PREFIX,
  iterateTensors,
  openSafetensorsModel,
  readShardStamp,
  readTensorBytes,
  writeShardedModel,
  type ByteSource,
  type TensorToWrite,
} from '../src/index.js';
import { buildRawFile, catchErrorAsync, createRandom, expectCode, headerText, withTempDir } from './helpers.js';

interface MemorySource extends ByteSource {
  reads: { name: string; offsetBytes: number; lengthBytes: number }[];
  closed: number;
}

/** An in-memory ByteSource (what an object store looks like to the adapter), recording every read. */
function memorySource(objects: Map<string, Uint8Array>, url = 'mem://bucket/model/', etags?: Map<string, string>): MemorySource {
  const source: MemorySource = {
    url,
    reads: [],
    closed: 0,
    list: async () => [...objects.keys()].sort(),
    open: async (name) => {
      const bytes = objects.get(name);
      if (bytes === undefined) return undefined;
      return {
        sizeBytes: bytes.length,
        ...(etags?.has(name) ? { etag: etags.get(name) } : {}),
        readInto: async (offsetBytes, target) => {
          source.reads.push({ name, offsetBytes, lengthBytes: target.length });
          if (offsetBytes + target.length > bytes.length) throw Object.assign(new Error('range past the end'), { code: 'OBJECT_CHANGED' });
          target.set(bytes.subarray(offsetBytes, offsetBytes + target.length));
        },
      };
    },
    close: () => {
      source.closed += 1;
    },
  };
  return source;
}

function tensors(): TensorToWrite[] {
  const random = createRandom(7);
  const make = (name: string, shape: number[]): TensorToWrite => {
    const count = shape.reduce((a, b) => a * b, 1);
    const data = new Uint8Array(count * 2);
    for (let i = 0; i < data.length; i++) data[i] = Math.floor(random() * 256);
    return { name, dtype: 'BF16', shape, data };
  };
  return [make('a', [300, 7]), make('b', [1001]), make('empty', [0, 4]), make('c', [64, 64]), { name: 'u8', dtype: 'U8', shape: [13], data: new Uint8Array(13).fill(9) }];
}

async function filesOf(dir: string): Promise<Map<string, Uint8Array>> {
  const objects = new Map<string, Uint8Array>();
  for (const name of await readdir(dir)) objects.set(name, new Uint8Array(await readFile(join(dir, name))));
  return objects;
}

describe('openSafetensorsModel({ source })', () => {
  it('opens an indexed model from a ByteSource exactly as from its directory: same tensors, slices, bytes', async () => {
    await withTempDir(async (dir) => {
      await writeShardedModel(dir, tensors(), { maxShardBytes: 4096 });
      const local = await openSafetensorsModel(dir);
      const source = memorySource(await filesOf(dir));
      const remote = await openSafetensorsModel({ source, ownsSource: true });
      expect(remote.shards.length).toBeGreaterThan(1);
      expect(remote.rootDir).toBe(source.url);
      expect(remote.indexPath).toBe(`${source.url}model.safetensors.index.json`);
      expect(remote.tensors.map((t) => [t.name, t.slice])).toEqual(local.tensors.map((t) => [t.name, t.slice]));
      expect(remote.tensors[0]?.shardPath.startsWith(source.url)).toBe(true);
      // The header costs two reads per shard: the 8-byte length, then the header.
      const headerReads = source.reads.filter((r) => r.name.endsWith('.safetensors'));
      expect(headerReads.length).toBe(remote.shards.length * 2);
      expect(headerReads.filter((r) => r.offsetBytes === 0).every((r) => r.lengthBytes === 8)).toBe(true);
      for (const tensor of local.tensors) {
        expect(Buffer.from(await readTensorBytes(remote, tensor.name)).equals(Buffer.from(await readTensorBytes(local, tensor.name)))).toBe(true);
      }
      const iterated: string[] = [];
      for await (const { tensor, bytes } of iterateTensors(remote)) {
        iterated.push(tensor.name);
        expect(Buffer.from(bytes).equals(Buffer.from(await readTensorBytes(local, tensor.name)))).toBe(true);
      }
      expect(iterated.length).toBe(local.tensors.length);
      expect(remote.closed).toBe(false);
      await remote.close();
      expect(remote.closed).toBe(true);
      expect(source.closed).toBe(1);
      await expect(readTensorBytes(remote, 'a')).rejects.toMatchObject({ code: 'MODEL_CLOSED' });
      await local.close();
    });
  });

  it('without an index: every top-level *.safetensors object, as in a directory', async () => {
    const header = headerText({ x: { dtype: 'U8', shape: [3], data_offsets: [0, 3] } });
    const objects = new Map([
      ['one.safetensors', buildRawFile(header, new Uint8Array([1, 2, 3]))],
      ['sub/ignored.safetensors', buildRawFile('{}')],
      ['notes.txt', new Uint8Array(4)],
    ]);
    const model = await openSafetensorsModel({ source: memorySource(objects) });
    expect(model.tensors.map((t) => t.name)).toEqual(['x']);
    expect([...(await readTensorBytes(model, 'x'))]).toEqual([1, 2, 3]);
    await model.close();
  });

  it('keeps every validation: forged length, out-of-bounds header, missing or traversing shards, unlisted tensors', async () => {
    const header = headerText({ x: { dtype: 'U8', shape: [3], data_offsets: [0, 3] } });
    const forged = buildRawFile(header, new Uint8Array(3), 2n ** 40n);
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: memorySource(new Map([['m.safetensors', forged]])) })), 'HEADER_TOO_LARGE');
    const outOfBounds = buildRawFile(header, new Uint8Array(3), 5000n);
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: memorySource(new Map([['m.safetensors', outOfBounds]])) })), 'HEADER_OUT_OF_BOUNDS');
    const short = buildRawFile(header, new Uint8Array(2));
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: memorySource(new Map([['m.safetensors', short]])) })), 'DATA_OUT_OF_BOUNDS');
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: memorySource(new Map([['m.safetensors', new Uint8Array(5)]])) })), 'HEADER_LENGTH_MISSING');
    const index = (weightMap: Record<string, string>) => new TextEncoder().encode(JSON.stringify({ weight_map: weightMap }));
    const good = buildRawFile(header, new Uint8Array(3));
    const missing = memorySource(new Map([['model.safetensors.index.json', index({ x: 'gone.safetensors' })]]));
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: missing })), 'INDEX_SHARD_MISSING');
    const traversal = memorySource(new Map([['model.safetensors.index.json', index({ x: '../other/m.safetensors' })]]));
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: traversal })), 'INDEX_SHARD_TRAVERSAL');
    const unlisted = memorySource(new Map([['model.safetensors.index.json', index({ y: 'm.safetensors' })], ['m.safetensors', good]]));
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: unlisted })), 'INDEX_TENSOR_UNLISTED');
    const owned = memorySource(new Map([['m.safetensors', forged]]));
    await catchErrorAsync(() => openSafetensorsModel({ source: owned, ownsSource: true }));
    expect(owned.closed).toBe(1);
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: memorySource(new Map()), index: 'model.safetensors.index.json' })), 'PATH_NOT_FOUND');
    expectCode(await catchErrorAsync(() => openSafetensorsModel({ source: memorySource(new Map([['a.txt', new Uint8Array(1)]])) })), 'NOT_SAFETENSORS');
  });

  it("passes a source's own read errors through unchanged (e.g. a retryable outage)", async () => {
    await withTempDir(async (dir) => {
      await writeShardedModel(dir, tensors(), { maxShardBytes: 1 << 20 });
      const source = memorySource(await filesOf(dir));
      const model = await openSafetensorsModel({ source });
      const outage = Object.assign(new Error('endpoint down'), { code: 'S3_UNAVAILABLE', retryable: true });
      // Reads that fail like an S3 outage: opening (header reads) and tensor reads see the same error object.
      const failing: ByteSource = { ...source, open: async (name) => ({ sizeBytes: (await source.open(name))!.sizeBytes, readInto: async () => Promise.reject(outage) }) };
      await expect(openSafetensorsModel({ source: failing })).rejects.toBe(outage);
      let fail = false;
      const flaky: ByteSource = {
        ...source,
        open: async (name) => {
          const inner = (await source.open(name))!;
          return { sizeBytes: inner.sizeBytes, readInto: (offsetBytes, target) => (fail ? Promise.reject(outage) : inner.readInto(offsetBytes, target)) };
        },
      };
      const later = await openSafetensorsModel({ source: flaky });
      fail = true;
      await expect(readTensorBytes(later, 'a')).rejects.toBe(outage);
      await later.close();
      await model.close();
    });
  });

  it("stamps each shard with its object's version, etag:<etag>, where the source gives one (none where it gives none or one too long)", async () => {
    const file = (name: string) => buildRawFile(headerText({ [name]: { dtype: 'U8', shape: [3], data_offsets: [0, 3] } }), new Uint8Array([1, 2, 3]));
    const objects = new Map([
      ['a.safetensors', file('x')],
      ['b.safetensors', file('y')],
      ['c.safetensors', file('z')],
    ]);
    const etags = new Map([
      ['a.safetensors', '"9b2cf535f27731c974343645a3985328"'],
      ['c.safetensors', `"${'f'.repeat(MAX_OBJECT_STAMP_CHARS)}"`],
    ]);
    const model = await openSafetensorsModel({ source: memorySource(objects, undefined, etags) });
    expect(model.shards.map((shard) => [shard.name, shard.stamp])).toEqual([
      ['a.safetensors', `${OBJECT_STAMP_PREFIX}"9b2cf535f27731c974343645a3985328"`],
      ['b.safetensors', null],
      ['c.safetensors', null],
    ]);
    // Reads of an object are conditional on its version: the stamp now is not asked of the source.
    expect(readShardStamp(model, 'a.safetensors')).toBeNull();
    await model.close();
  });
});
