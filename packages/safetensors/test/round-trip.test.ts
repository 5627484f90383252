import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DTYPE_BITS,
  SAFETENSORS_DTYPES,
  computeTensorByteSize,
  createSafetensorsWriter,
  createShardedModelWriter,
  iterateTensors,
  openSafetensorsModel,
  parseSafetensorsBytes,
  readTensorBytes,
  writeSafetensorsFile,
  writeShardedModel,
  type SafetensorsDtype,
  type TensorInfo,
  type TensorToWrite,
} from '../src/index.js';
import { catchErrorAsync, createRandom, expectCode, randomBytes, withTempDir } from './helpers.js';

/** A few tensors of each dtype: scalar, empty, vector, matrix; sizes valid for sub-byte dtypes. */
function tensorsOfEveryDtype(seed: number): TensorToWrite[] {
  const random = createRandom(seed);
  const out: TensorToWrite[] = [];
  for (const dtype of SAFETENSORS_DTYPES) {
    const bits = DTYPE_BITS[dtype];
    // Element counts whose bit total is a whole number of bytes: multiples of 4 cover F4 and F6.
    const shapes: number[][] = bits % 8 === 0 ? [[], [0], [7], [3, 5], [2, 0, 3]] : [[0], [4], [3, 8], [1, 4, 2]];
    shapes.forEach((shape, i) => {
      const size = computeTensorByteSize(shape, dtype).byteSize as number;
      out.push({ name: `${dtype.toLowerCase()}.${i}`, dtype, shape, data: randomBytes(random, size) });
    });
  }
  return out;
}

describe('write -> read round trips', () => {
  it('a single file with every dtype reads back bit-identical, in order, with metadata', async () => {
    await withTempDir(async (dir) => {
      const tensors = tensorsOfEveryDtype(1);
      const path = join(dir, 'all.safetensors');
      await writeSafetensorsFile(path, tensors, { format: 'pt', note: 'ünïcode ✓' });
      const raw = new Uint8Array(await readFile(path));
      const headerLength = Number(new DataView(raw.buffer, raw.byteOffset).getBigUint64(0, true));
      expect((8 + headerLength) % 8).toBe(0);
      // Padding is spaces.
      const closing = raw.lastIndexOf(0x7d, 8 + headerLength - 1);
      expect(closing).toBeGreaterThan(8);
      expect([...raw.subarray(closing + 1, 8 + headerLength)].every((b) => b === 0x20)).toBe(true);

      const model = await openSafetensorsModel(path);
      try {
        expect(model.shards).toHaveLength(1);
        expect(model.shards[0]?.metadata).toEqual({ format: 'pt', note: 'ünïcode ✓' });
        expect(model.shards[0]?.headerBytes).toBe(headerLength);
        expect(model.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
        for (const tensor of tensors) {
          const info = model.getTensor(tensor.name);
          expect(info?.dtype).toBe(tensor.dtype);
          expect(info?.shape).toEqual(tensor.shape);
          const bytes = await readTensorBytes(model, tensor.name);
          expect(Buffer.from(bytes).equals(Buffer.from(tensor.data))).toBe(true);
          // Slice identity: absolute offset = 8 + N + begin, size = end - begin, and the raw file agrees.
          const [begin, end] = info!.dataOffsets;
          expect(info!.slice).toEqual({ shardName: 'all.safetensors', offsetBytes: 8 + headerLength + begin, sizeBytes: end - begin });
          expect(Buffer.from(raw.subarray(info!.slice.offsetBytes, info!.slice.offsetBytes + info!.slice.sizeBytes)).equals(Buffer.from(tensor.data))).toBe(true);
          expect(model.findBySlice(info!.slice)?.slice).toEqual(info!.slice);
        }
        // The in-memory parser agrees with the file opener.
        const parsed = parseSafetensorsBytes(raw, 'all.safetensors');
        expect(parsed.tensors.map((t) => [t.name, t.dataOffsets])).toEqual(model.tensors.map((t) => [t.name, t.dataOffsets]));
      } finally {
        await model.close();
      }
    });
  });

  it('a sharded model (index) and a bare directory of shards read back identical', async () => {
    await withTempDir(async (dir) => {
      const tensors = tensorsOfEveryDtype(2);
      const { indexPath, shardPaths } = await writeShardedModel(join(dir, 'm'), tensors, { maxShardBytes: 300, shardMetadata: { format: 'pt' } });
      expect(shardPaths.length).toBeGreaterThan(2);
      expect(shardPaths[0]).toMatch(new RegExp(`model-00001-of-0000${shardPaths.length}\\.safetensors$`));
      const index = JSON.parse(await readFile(indexPath, 'utf8')) as { metadata: { total_size: number }; weight_map: Record<string, string> };
      expect(index.metadata.total_size).toBe(tensors.reduce((sum, t) => sum + t.data.length, 0));
      expect(Object.keys(index.weight_map).sort()).toEqual(tensors.map((t) => t.name).sort());

      for (const opened of [indexPath, join(dir, 'm')]) {
        const model = await openSafetensorsModel(opened);
        try {
          expect(model.indexPath).toBe(indexPath);
          expect(model.shards.map((s) => s.path)).toEqual(shardPaths);
          expect(model.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
          for (const tensor of tensors) {
            expect(index.weight_map[tensor.name]).toBe(model.getTensor(tensor.name)?.slice.shardName);
            expect(Buffer.from(await readTensorBytes(model, tensor.name)).equals(Buffer.from(tensor.data))).toBe(true);
          }
        } finally {
          await model.close();
        }
      }
      // Without the index: a directory of shards, sorted by name.
      await writeFile(indexPath + '.bak', await readFile(indexPath));
      await (await import('node:fs/promises')).unlink(indexPath);
      const bare = await openSafetensorsModel(join(dir, 'm'));
      try {
        expect(bare.indexPath).toBeNull();
        expect(bare.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
      } finally {
        await bare.close();
      }
    });
  });

  it('keeps the given order for integer-like names and sorts the model by offsets', async () => {
    await withTempDir(async (dir) => {
      const names = ['b', '10', '2', '__proto__', 'a', ''];
      const tensors = names.map((name, i) => ({ name, dtype: 'U8' as const, shape: [i + 1], data: new Uint8Array(i + 1).fill(i) }));
      const path = join(dir, 'names.safetensors');
      await writeSafetensorsFile(path, tensors, Object.fromEntries([['__proto__', 'x']]) as Record<string, string>);
      const model = await openSafetensorsModel(path);
      try {
        expect(model.tensors.map((t) => t.name)).toEqual(names);
        expect(Object.keys(model.shards[0]?.metadata ?? {})).toEqual(['__proto__']);
        expect(Array.from(await readTensorBytes(model, '__proto__'))).toEqual([3, 3, 3, 3]);
      } finally {
        await model.close();
      }
    });
  });

  it('readTensorBytes fills a caller buffer, refuses a short one, and reads after close fail', async () => {
    await withTempDir(async (dir) => {
      const data = randomBytes(createRandom(3), 1000);
      const path = join(dir, 't.safetensors');
      await writeSafetensorsFile(path, [{ name: 'w', dtype: 'BF16', shape: [500], data }]);
      const model = await openSafetensorsModel(path);
      const target = new Uint8Array(1500).fill(0xee);
      const view = await readTensorBytes(model, model.tensors[0]!, target);
      expect(view.buffer).toBe(target.buffer);
      expect(Buffer.from(view).equals(Buffer.from(data))).toBe(true);
      expect(target[1000]).toBe(0xee);
      const small = await catchErrorAsync(() => readTensorBytes(model, 'w', new Uint8Array(999)));
      expectCode(small, 'TARGET_TOO_SMALL');
      expect(small.offsets).toMatchObject({ expected: 1000, actual: 999 });
      expectCode(await catchErrorAsync(() => readTensorBytes(model, 'nope')), 'UNKNOWN_TENSOR');
      expectCode(await catchErrorAsync(() => readTensorBytes(model, { ...model.tensors[0]!, slice: { ...model.tensors[0]!.slice, offsetBytes: 0 } })), 'UNKNOWN_TENSOR');
      expect(model.closed).toBe(false);
      await model.close();
      expect(model.closed).toBe(true);
      await model.close();
      expectCode(await catchErrorAsync(() => readTensorBytes(model, 'w')), 'MODEL_CLOSED');
    });
  });

  it('iterateTensors yields every tensor in file order for any buffer bound, with and without reuse', async () => {
    await withTempDir(async (dir) => {
      const random = createRandom(4);
      const tensors: TensorToWrite[] = [];
      for (let i = 0; i < 40; i++) {
        const n = Math.floor(random() * 300);
        tensors.push({ name: `t${i}`, dtype: 'BF16', shape: [n], data: randomBytes(random, n * 2) });
      }
      await writeShardedModel(join(dir, 'm'), tensors, { maxShardBytes: 4000 });
      const model = await openSafetensorsModel(join(dir, 'm'));
      try {
        for (const maxBufferBytes of [1, 64, 500, 1 << 20]) {
          for (const reuseBuffers of [false, true]) {
            const seen: string[] = [];
            const kept: Uint8Array[] = [];
            for await (const { tensor, bytes } of iterateTensors(model, { maxBufferBytes, reuseBuffers })) {
              const expected = tensors.find((t) => t.name === tensor.name)!;
              expect(Buffer.from(bytes).equals(Buffer.from(expected.data))).toBe(true);
              seen.push(tensor.name);
              kept.push(bytes);
            }
            expect(seen).toEqual(model.tensors.map((t) => t.name));
            if (!reuseBuffers) {
              // Without reuse, earlier views stay valid.
              kept.forEach((bytes, i) => expect(Buffer.from(bytes).equals(Buffer.from(tensors.find((t) => t.name === seen[i])!.data))).toBe(true));
            }
          }
        }
        // Two reuse-mode iterations interleaved on one model never share a pooled buffer.
        const first = iterateTensors(model, { maxBufferBytes: 700, reuseBuffers: true });
        const second = iterateTensors(model, { maxBufferBytes: 300, reuseBuffers: true });
        for (;;) {
          const [a, b] = [await first.next(), await second.next()];
          if (a.done || b.done) {
            expect(a.done && b.done).toBe(true);
            break;
          }
          for (const { tensor, bytes } of [a.value, b.value]) {
            expect(Buffer.from(bytes).equals(Buffer.from(tensors.find((t) => t.name === tensor.name)!.data))).toBe(true);
          }
        }
        const filtered: string[] = [];
        for await (const { tensor } of iterateTensors(model, { filter: (t) => t.name.endsWith('7') })) filtered.push(tensor.name);
        expect(filtered).toEqual(['t7', 't17', 't27', 't37']);
        // Breaking out early is clean.
        for await (const _ of iterateTensors(model)) break;
        expectCode(await catchErrorAsync(async () => {
          for await (const _ of iterateTensors(model, { maxBufferBytes: 0 })) break;
        }), 'INVALID_ARGUMENT');
        // An async filter: its promise is truthy, so every tensor was read whatever it decided.
        const asyncFilter = await catchErrorAsync(async () => {
          for await (const _ of iterateTensors(model, { filter: (async (t: TensorInfo) => t.name === 't7') as never })) break;
        });
        expectCode(asyncFilter, 'INVALID_ARGUMENT');
        expect(asyncFilter.tensor).toBe('t0');
        expectCode(await catchErrorAsync(async () => {
          for await (const _ of iterateTensors(model, { filter: 'all' as never })) break;
        }), 'INVALID_ARGUMENT');
      } finally {
        await model.close();
      }
    });
  });

  it('streaming writer: bytes in arbitrary chunks; size mismatches abort and leave no temp file', async () => {
    await withTempDir(async (dir) => {
      const random = createRandom(5);
      const specs = [
        { name: 'x', dtype: 'F32' as SafetensorsDtype, shape: [1000] },
        { name: 'y', dtype: 'I8' as SafetensorsDtype, shape: [3] },
      ];
      const data = randomBytes(random, 4003);
      const path = join(dir, 's.safetensors');
      const writer = await createSafetensorsWriter(path, specs);
      for (let at = 0; at < data.length; ) {
        const n = Math.min(data.length - at, 1 + Math.floor(random() * 700));
        await writer.write(data.subarray(at, at + n));
        at += n;
      }
      await writer.close();
      expectCode(await catchErrorAsync(() => writer.write(new Uint8Array(1))), 'WRITER_CLOSED');
      const model = await openSafetensorsModel(path);
      expect(Buffer.from(await readTensorBytes(model, 'x')).equals(Buffer.from(data.subarray(0, 4000)))).toBe(true);
      expect(Array.from(await readTensorBytes(model, 'y'))).toEqual(Array.from(data.subarray(4000)));
      await model.close();

      const tooMuch = await createSafetensorsWriter(join(dir, 'over.safetensors'), specs);
      expectCode(await catchErrorAsync(() => tooMuch.write(new Uint8Array(4004))), 'WRITE_SIZE_MISMATCH');
      const tooLittle = await createSafetensorsWriter(join(dir, 'under.safetensors'), specs);
      await tooLittle.write(new Uint8Array(10));
      expectCode(await catchErrorAsync(() => tooLittle.close()), 'WRITE_SIZE_MISMATCH');
      const aborted = await createSafetensorsWriter(path, specs);
      await aborted.write(new Uint8Array(100));
      await aborted.abort();
      // Only the committed file is there; the aborted rewrite left the old content intact.
      expect(await readdir(dir)).toEqual(['s.safetensors']);
      const again = await openSafetensorsModel(path);
      expect(Array.from(await readTensorBytes(again, 'y'))).toEqual(Array.from(data.subarray(4000)));
      await again.close();

      // A chunk that is not bytes is refused before anything is counted or written; the writer
      // goes on (a Uint16Array was counted in elements, each value cut to its low byte).
      const typed = await createSafetensorsWriter(join(dir, 'typed.safetensors'), specs);
      for (const wrong of [new Uint16Array(2), new DataView(new ArrayBuffer(4)), new ArrayBuffer(4), [1, 2], null]) {
        expectCode(await catchErrorAsync(() => typed.write(wrong as never)), 'INVALID_ARGUMENT');
      }
      expect(typed.writtenDataBytes).toBe(0);
      await typed.write(data);
      await typed.close();
      const shardedTyped = await createShardedModelWriter(join(dir, 'typed-sharded'), specs, { maxShardBytes: 1000 });
      expectCode(await catchErrorAsync(() => shardedTyped.write(new Uint16Array(2) as never)), 'INVALID_ARGUMENT');
      await shardedTyped.write(Buffer.from(data));
      const written = await shardedTyped.close();
      const typedModel = await openSafetensorsModel(written.indexPath);
      expect(Array.from(await readTensorBytes(typedModel, 'y'))).toEqual(Array.from(data.subarray(4000)));
      await typedModel.close();
    });
  });

  it('writers refuse overlapping calls; a read-ahead failing mid-iteration surfaces as SafetensorsError', async () => {
    await withTempDir(async (dir) => {
      const specs = [{ name: 'x', dtype: 'U8' as SafetensorsDtype, shape: [8 << 20] }];
      const writer = await createSafetensorsWriter(join(dir, 'w.safetensors'), specs);
      const first = writer.write(new Uint8Array(5 << 20));
      expectCode(await catchErrorAsync(() => writer.write(new Uint8Array(1))), 'INVALID_ARGUMENT');
      await first;
      await writer.write(new Uint8Array(3 << 20));
      await writer.close();
      const sharded = await createShardedModelWriter(join(dir, 's'), specs, { maxShardBytes: 1 << 30 });
      const pending = sharded.write(new Uint8Array(5 << 20));
      expectCode(await catchErrorAsync(() => sharded.write(new Uint8Array(1))), 'INVALID_ARGUMENT');
      await pending;

      // Many small tensors, then the file shrinks under an open model: the read-ahead fails while the
      // consumer holds a batch, and the failure arrives as a typed error on the next step.
      const tensors = Array.from({ length: 8 }, (_, i) => ({ name: `t${i}`, dtype: 'U8' as const, shape: [1000], data: new Uint8Array(1000).fill(i) }));
      const path = join(dir, 'shrink.safetensors');
      await writeSafetensorsFile(path, tensors);
      const model = await openSafetensorsModel(path);
      const seen: string[] = [];
      const error = await catchErrorAsync(async () => {
        for await (const { tensor } of iterateTensors(model, { maxBufferBytes: 1000 })) {
          seen.push(tensor.name);
          if (seen.length === 1) {
            await (await import('node:fs/promises')).truncate(path, model.tensors[3]!.slice.offsetBytes);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        }
      });
      // The next read is inside the new end: the file's changed stamp stops it.
      expectCode(error, 'SHARD_CHANGED');
      expect(seen.length).toBeLessThanOrEqual(3);
      await model.close();
    });
  });

  it('sharded streaming writer splits at tensor boundaries, keeps zero-byte shards, rejects bad sizes', async () => {
    await withTempDir(async (dir) => {
      const specs = [
        { name: 'big', dtype: 'U8' as SafetensorsDtype, shape: [100] }, // larger than maxShardBytes: own shard
        { name: 'e1', dtype: 'U8' as SafetensorsDtype, shape: [0] },
        { name: 's1', dtype: 'U8' as SafetensorsDtype, shape: [30] },
        { name: 's2', dtype: 'U8' as SafetensorsDtype, shape: [30] },
        { name: 'e2', dtype: 'U8' as SafetensorsDtype, shape: [0] },
      ];
      const data = Uint8Array.from({ length: 160 }, (_, i) => i);
      const writer = await createShardedModelWriter(join(dir, 'm'), specs, { maxShardBytes: 50 });
      expect(writer.shards.map((s) => s.tensors.map((t) => t.name))).toEqual([['big'], ['e1', 's1'], ['s2', 'e2']]);
      await writer.write(data.subarray(0, 7));
      await writer.write(data.subarray(7, 131));
      await writer.write(data.subarray(131));
      const result = await writer.close();
      expect(result.shardPaths).toHaveLength(3);
      const model = await openSafetensorsModel(result.indexPath);
      for await (const { tensor, bytes } of iterateTensors(model)) {
        const start = { big: 0, e1: 100, s1: 100, s2: 130, e2: 160 }[tensor.name] as number;
        expect(Array.from(bytes)).toEqual(Array.from(data.subarray(start, start + tensor.slice.sizeBytes)));
      }
      await model.close();
      const over = await createShardedModelWriter(join(dir, 'o'), specs, { maxShardBytes: 50 });
      expectCode(await catchErrorAsync(() => over.write(new Uint8Array(161))), 'WRITE_SIZE_MISMATCH');
      expect((await readdir(join(dir, 'o'))).filter((n) => n.includes('.tmp-'))).toEqual([]);
      const short = await createShardedModelWriter(join(dir, 'u'), specs, { maxShardBytes: 50 });
      await short.write(new Uint8Array(120));
      expectCode(await catchErrorAsync(() => short.close()), 'WRITE_SIZE_MISMATCH');
      expect((await readdir(join(dir, 'u'))).some((n) => n.endsWith('.json'))).toBe(false);
    });
  });

  it('writers reject invalid tensors before touching the disk', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'bad.safetensors');
      const cases: TensorToWrite[][] = [
        [{ name: 'a', dtype: 'BF16', shape: [3], data: new Uint8Array(5) }],
        [{ name: 'a', dtype: 'F4', shape: [3], data: new Uint8Array(2) }],
        [{ name: 'a', dtype: 'XX' as SafetensorsDtype, shape: [1], data: new Uint8Array(1) }],
        [{ name: 'a', dtype: 'U8', shape: [-1], data: new Uint8Array(0) }],
        [{ name: 'a', dtype: 'U8', shape: [1.5], data: new Uint8Array(1) }],
        [{ name: '__metadata__', dtype: 'U8', shape: [1], data: new Uint8Array(1) }],
        [
          { name: 'a', dtype: 'U8', shape: [1], data: new Uint8Array(1) },
          { name: 'a', dtype: 'U8', shape: [1], data: new Uint8Array(1) },
        ],
      ];
      for (const tensors of cases) expectCode(await catchErrorAsync(() => writeSafetensorsFile(path, tensors)), 'WRITE_INVALID_TENSOR');
      expect(await readdir(dir)).toEqual([]);
    });
  });
});
