import { readFile, rename, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { writeSignedManifest } from '@splitzip/test-support/manifest';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCodebook, encode, readPayloadMeta } from '@splitzip/codec';
import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import type { DecodeBackend } from '../src/create-cpu-decoder.js';
import { createCpuDecoder } from '../src/create-cpu-decoder.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { createFileReader } from '../src/create-file-reader.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openModel } from '../src/open-model.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, standardTensors, writeModel } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let raw: Map<string, Uint8Array>;
let caseIndex = 0;
const TARGET = 'embed.weight';

beforeAll(async () => {
  const temp = await makeTempDir('failures');
  root = temp.dir;
  cleanup = temp.cleanup;
  model = await writeModel(join(root, 'model'), standardTensors());
  raw = await readAllRaw(model);
});
afterAll(async () => {
  await model?.close();
  await cleanup?.();
});

/** A fresh cache of the standard model (every gate-passing BF16 tensor cached and aliased). */
async function freshCache(): Promise<{ cacheDir: string; blobOf: (name: string) => string; keyOf: (name: string) => string }> {
  caseIndex += 1;
  const cacheDir = join(root, `cache-${caseIndex}`);
  const keys = await buildCache(model, cacheDir);
  return {
    cacheDir,
    keyOf: (name) => keys.get(name) as string,
    blobOf: (name) => join(cacheDir, 'blobs', `${keys.get(name)}.bin`),
  };
}

/**
 * How a cached tensor's blob is read: by the store on the loading thread, by the runtime's own
 * reader, or by a decode thread from the file the loading thread opened (readDecode: every
 * tensor, the bound 0).
 */
let threadReads: ReturnType<typeof createThreadDecoder> | undefined;
const readModes = {
  'store readBlob': () => ({ reader: undefined, backend: 'cpu' as const }),
  'runtime reader': () => ({ reader: createFileReader(), backend: 'cpu' as const }),
  'decode thread reads': () => {
    threadReads ??= createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    return { reader: undefined, backend: threadReads };
  },
};
afterAll(async () => {
  await threadReads?.close?.();
});

describe('a corrupt payload checked off-thread', () => {
  it('is CACHE_READ_FAILED from the thread decoder and served raw', async () => {
    const { cacheDir, blobOf } = await freshCache();
    const bytes = await readFile(blobOf(TARGET));
    const at = Math.floor(bytes.length * 0.7);
    bytes[at] = (bytes[at] as number) ^ 0x01;
    await writeFile(blobOf(TARGET), bytes);
    const cache = await openShardCache(cacheDir);
    const reader = createFileReader();
    const threads = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 }); // every tensor through the workers
    try {
      const { report, totals } = await loadAllAndCheck(cache, { reader, backend: threads });
      expect(report).toMatchObject({ source: 'raw', reason: 'cache-failed', error: { code: 'CACHE_READ_FAILED' } });
      expect(totals.fromCache).toBe(8);
      await expect(loadTensor({ model, name: TARGET }, { cache, reader, backend: threads, cacheOnly: true })).rejects.toMatchObject({
        code: 'CACHE_READ_FAILED',
        details: expect.objectContaining({ tensor: TARGET }),
      });
    } finally {
      await threads.close?.();
      await reader.close();
      await cache.close();
    }
  });
});

/** Loads the whole model, checks every tensor bit-exact, returns the report of TARGET. */
async function loadAllAndCheck(cache: ShardCache, options: Parameters<typeof loadModel>[2] = {}) {
  const load = loadModel(model, cache, options);
  for await (const tensor of load) {
    expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
  }
  return { report: load.reports.find((r) => r.name === TARGET), totals: load.totals };
}

describe('one cache handle across a blob damaged and repaired between loads', () => {
  it.each([
    ['the store verifies (cpu backend)', 'cpu' as const],
    ['the decode backend verifies (threads)', 'threads' as const],
  ])('%s: served raw while damaged, from the cache again once a repaired file replaces it', async (_label, backend) => {
    const { cacheDir, blobOf } = await freshCache();
    const cache = await openShardCache(cacheDir);
    try {
      // The first load keeps the blob's file open (the store's synchronous reads of small blobs).
      expect((await loadAllAndCheck(cache, { backend })).report).toMatchObject({ source: 'cache' });
      const good = await readFile(blobOf(TARGET));
      const bad = Buffer.from(good);
      bad[Math.floor(bad.length * 0.6)]! ^= 0x10;
      await writeFile(blobOf(TARGET), bad); // in place: the kept descriptor sees it
      expect((await loadAllAndCheck(cache, { backend })).report).toMatchObject({ source: 'raw', reason: 'cache-failed', error: { code: 'CACHE_READ_FAILED' } });
      // Repaired as a rebuild writes blobs: a new file renamed over the damaged one.
      await writeFile(`${blobOf(TARGET)}.new`, good);
      await rename(`${blobOf(TARGET)}.new`, blobOf(TARGET));
      expect((await loadAllAndCheck(cache, { backend })).report).toMatchObject({ source: 'cache' });
    } finally {
      await cache.close();
    }
  });
});

describe('a bad blob is reported and served raw, never decoded into wrong data', () => {
  const damages = {
    'a flipped byte': async (blob: string) => {
      const bytes = await readFile(blob);
      const at = Math.floor(bytes.length * 0.6);
      bytes[at] = (bytes[at] as number) ^ 0x10;
      await writeFile(blob, bytes);
    },
    'a truncated blob': async (blob: string) => truncate(blob, 1000),
    'a deleted blob': async (blob: string) => unlink(blob),
    'a zeroed header': async (blob: string) => {
      const bytes = await readFile(blob);
      bytes.fill(0, 0, 64);
      await writeFile(blob, bytes);
    },
  };
  for (const [damage, apply] of Object.entries(damages)) {
    for (const [mode, makeMode] of Object.entries(readModes)) {
      it(`${damage} (${mode})`, async () => {
        const { cacheDir, blobOf, keyOf } = await freshCache();
        await apply(blobOf(TARGET));
        const cache = await openShardCache(cacheDir);
        try {
          const { reader, backend } = makeMode();
          const threadReadsBefore = threadReads?.stats().threadReads ?? 0;
          const { report, totals } = await loadAllAndCheck(cache, { reader, backend });
          if (backend !== 'cpu') expect(backend.stats().threadReads - threadReadsBefore).toBeGreaterThanOrEqual(8);
          expect(report).toMatchObject({ source: 'raw', reason: 'cache-failed', key: keyOf(TARGET) });
          expect(report?.error?.code).toMatch(/^CACHE_(READ_FAILED|ENTRY_MISMATCH)$/);
          // The detail says what failed (it said only the code), and how to put a lost blob back.
          expect(report?.detail).toBe(`${report?.error?.code}: ${report?.error?.message}: served raw; if its blob is missing or damaged, \`splitzip build <model> --out <cache> --repair\` puts it back`);
          expect(totals.fallbacks).toBe(1);
          expect(totals.fromCache).toBe(8); // every other cached tensor still comes from the cache
          // cacheOnly: the same failure is a typed error naming the tensor and the entry.
          await expect(loadTensor({ model, name: TARGET }, { cache, reader, backend, cacheOnly: true })).rejects.toMatchObject({
            code: expect.stringMatching(/^CACHE_(READ_FAILED|ENTRY_MISMATCH)$/),
            message: expect.stringContaining(TARGET),
            details: expect.objectContaining({ tensor: TARGET, key: keyOf(TARGET) }),
          });
          // A bare slice has no raw source: the cache error is thrown.
          await expect(loadTensor(model.getTensor(TARGET)?.slice as never, { cache, reader, backend })).rejects.toMatchObject({
            code: expect.stringMatching(/^CACHE_/),
          });
          await reader?.close();
        } finally {
          await cache.close();
        }
      });
    }
  }
});

describe('a manifest entry that disagrees with its blob', () => {
  for (const [mode, makeMode] of Object.entries(readModes)) {
    it(`is reported as CACHE_ENTRY_MISMATCH and served raw (${mode})`, async () => {
      const { cacheDir, blobOf, keyOf } = await freshCache();
      // A valid payload of the same values and size, but another codebook order: header and checksum
      // are self-consistent, only the manifest's codebook/checksum disagree.
      const original = await readFile(blobOf(TARGET));
      const meta = readPayloadMeta(original);
      const bytes = raw.get(TARGET) as Uint8Array;
      const values = new Uint16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
      const swapped = encode(values, createCodebook([...meta.codebook.exponents].reverse()), { chunkSize: meta.chunkSize });
      expect(swapped.length).toBe(original.length);
      await writeFile(blobOf(TARGET), swapped);
      const cache = await openShardCache(cacheDir);
      try {
        const { reader, backend } = makeMode();
        const { report } = await loadAllAndCheck(cache, { reader, backend });
        expect(report).toMatchObject({ source: 'raw', reason: 'cache-failed', error: { code: 'CACHE_ENTRY_MISMATCH' } });
        await expect(loadTensor({ model, name: TARGET }, { cache, reader, backend, cacheOnly: true })).rejects.toMatchObject({
          code: 'CACHE_ENTRY_MISMATCH',
          details: expect.objectContaining({ key: keyOf(TARGET) }),
        });
        await reader?.close();
      } finally {
        await cache.close();
      }
    });
  }

  it('an entry whose shape does not describe the tensor is not used', async () => {
    const { cacheDir } = await freshCache();
    const cache = await openShardCache(cacheDir);
    try {
      // Serve embed.weight's slice with a target that claims another shape: refused before any read.
      const info = model.getTensor(TARGET);
      const lying = { ...info, shape: [100, 64] } as never;
      const fakeModel = { ...model, findBySlice: () => lying, getTensor: () => lying } as unknown as SafetensorsModel;
      await expect(loadTensor({ model: fakeModel, name: TARGET }, { cache, cacheOnly: true })).rejects.toMatchObject({
        code: 'CACHE_ENTRY_MISMATCH',
      });
    } finally {
      await cache.close();
    }
  });
});

describe('a failing decode backend', () => {
  it('is reported as DECODE_FAILED and the tensors are served raw (typed error with cacheOnly)', async () => {
    const { cacheDir } = await freshCache();
    const cache = await openShardCache(cacheDir);
    let calls = 0;
    const failing: DecodeBackend = {
      name: 'test:failing',
      decode(_payload, _meta, out) {
        calls += 1;
        out.fill(0xabcd); // garbage written before failing must not leak out
        throw new Error('device lost');
      },
    };
    try {
      const load = loadModel(model, cache, { backend: failing });
      for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
      expect(calls).toBe(9);
      expect(load.totals.fromCache).toBe(0);
      expect(load.totals.fallbacks).toBe(9);
      expect(load.reports.filter((r) => r.reason === 'cache-failed').every((r) => r.error?.code === 'DECODE_FAILED')).toBe(true);
      await expect(loadModel(model, cache, { backend: failing, cacheOnly: true, filter: (t) => t.name === TARGET }).drain()).rejects.toMatchObject({
        code: 'DECODE_FAILED',
        details: expect.objectContaining({ backend: 'test:failing', tensor: TARGET }),
      });
    } finally {
      await cache.close();
    }
  });

  it('throwing null or undefined is reported as DECODE_FAILED too, and the tensor served raw', async () => {
    const { cacheDir } = await freshCache();
    const cache = await openShardCache(cacheDir);
    try {
      for (const thrown of [null, undefined]) {
        const failing: DecodeBackend = {
          name: 'test:throws-nothing',
          decode() {
            throw thrown;
          },
        };
        const loaded = await loadTensor({ model, name: TARGET }, { cache, backend: failing });
        expect(loaded).toMatchObject({ source: 'raw', report: { reason: 'cache-failed', error: { code: 'DECODE_FAILED' } } });
        expect(sameBytes(loaded.data, raw.get(TARGET) as Uint8Array)).toBe(true);
        await expect(loadTensor({ model, name: TARGET }, { cache, backend: failing, cacheOnly: true })).rejects.toMatchObject({
          code: 'DECODE_FAILED',
          message: expect.stringContaining(String(thrown)),
        });
      }
    } finally {
      await cache.close();
    }
  });

  it('a custom reader rejecting with null or undefined: the tensor is CACHE_READ_FAILED and served raw (a TypeError escaped the load before)', async () => {
    const { cacheDir } = await freshCache();
    const cache = await openShardCache(cacheDir);
    const files = createFileReader();
    try {
      for (const thrown of [null, undefined]) {
        const reader = {
          readExact: async (path: string, target: Uint8Array, positionBytes: number) => {
            if (path.includes('/blobs/')) throw thrown;
            return files.readExact(path, target, positionBytes);
          },
          close: async () => undefined,
        };
        const loaded = await loadTensor({ model, name: TARGET }, { cache, reader });
        expect(loaded).toMatchObject({ source: 'raw', report: { reason: 'cache-failed', error: { code: 'CACHE_READ_FAILED' } } });
        expect(sameBytes(loaded.data, raw.get(TARGET) as Uint8Array)).toBe(true);
        for await (const tensor of loadModel(model, cache, { reader })) expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array)).toBe(true);
      }
    } finally {
      await files.close();
      await cache.close();
    }
  });

  it('a thread decoder closed by its owner mid-load fails its tensors as DECODE_FAILED, served raw; a load after close refuses it up front', async () => {
    const { cacheDir } = await freshCache();
    const cache = await openShardCache(cacheDir);
    const threads = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    try {
      // Reads queue for the workers at once (up to 8 tensors in flight); closing drops the queued ones.
      // One staging slot: the reads behind the first wait for it, so some are still queued when the
      // first tensor is delivered (with a slot each, all could finish first on a loaded machine).
      const pool = cache.createStagingPool({ slotCount: 1, shared: true });
      const load = loadModel(model, cache, { backend: threads, concurrency: 8, pool });
      let seen = 0;
      for await (const tensor of load) {
        if (seen++ === 0) void threads.close?.();
        expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
      }
      const failed = load.reports.filter((r) => r.reason === 'cache-failed');
      expect(failed.length).toBeGreaterThan(0);
      expect(failed.every((r) => r.error?.code === 'DECODE_FAILED')).toBe(true);
      // Closed before the call: INVALID_ARGUMENT, not a quiet fallback per tensor (closed-backend.test.ts).
      await expect(loadTensor({ model, name: TARGET }, { cache, backend: threads })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'backend' } });
    } finally {
      await threads.close?.();
      await cache.close();
    }
  });

  it('a backend that silently returns wrong values is caught by verifyDigest', async () => {
    const { cacheDir } = await freshCache();
    const cache = await openShardCache(cacheDir);
    const cpu = createCpuDecoder();
    const lying: DecodeBackend = {
      name: 'test:lying',
      async decode(payload, meta, out) {
        await cpu.decode(payload, meta, out);
        if (out.length > 0) out[out.length >> 1] = (out[out.length >> 1] as number) ^ 1;
      },
    };
    try {
      const load = loadModel(model, cache, { backend: lying, verifyDigest: true });
      for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
      // The empty tensor has no value to flip; all others fail their digest and come raw.
      expect(load.totals.fromCache).toBe(1);
      expect(load.reports.filter((r) => r.reason === 'cache-failed').every((r) => r.error?.code === 'DIGEST_MISMATCH')).toBe(true);
    } finally {
      await cache.close();
    }
  });
});

describe('digest verification', () => {
  it('catches a tampered entry whose blob and manifest agree with each other but not with the original bytes', async () => {
    const { cacheDir, blobOf, keyOf } = await freshCache();
    // Replace the blob by a valid payload of OTHER values, and update the manifest's blob fields so
    // that every structural check (size, header, codebook, checksum) passes.
    const other = new Uint16Array(bf16Weights(6400, 999).buffer);
    const original = readPayloadMeta(await readFile(blobOf(TARGET)));
    const forged = encode(other, original.codebook, { chunkSize: original.chunkSize });
    const forgedMeta = readPayloadMeta(forged);
    const manifestPath = join(cacheDir, 'manifest.json');
    const manifest = JSON.parse(await readFile(manifestPath, 'utf8'));
    const entry = manifest.entries[keyOf(TARGET)];
    entry.meta.escape_count = forgedMeta.escapeCount;
    entry.meta.comp_bytes = forgedMeta.compBytes;
    entry.meta.checksum = forgedMeta.checksum;
    entry.comp_bytes = forgedMeta.compBytes;
    entry.blob_checksum = `xxh32:${forgedMeta.checksum.toString(16).padStart(8, '0')}`;
    await writeSignedManifest(manifestPath, manifest);
    await rm(blobOf(TARGET));
    await writeFile(blobOf(TARGET), forged.subarray(0, forgedMeta.compBytes));
    const cache = await openShardCache(cacheDir);
    try {
      // Without the digest the structural checks pass and the forged values would be served…
      const unchecked = await loadTensor({ model, name: TARGET }, { cache });
      expect(unchecked.source).toBe('cache');
      expect(sameBytes(unchecked.data, raw.get(TARGET) as Uint8Array)).toBe(false);
      // …with verifyDigest the mismatch is caught, reported, and the tensor comes raw.
      const { report } = await loadAllAndCheck(cache, { verifyDigest: true });
      expect(report).toMatchObject({ source: 'raw', reason: 'cache-failed', error: { code: 'DIGEST_MISMATCH' } });
      await expect(loadTensor({ model, name: TARGET }, { cache, verifyDigest: true, cacheOnly: true })).rejects.toMatchObject({
        code: 'DIGEST_MISMATCH',
        details: expect.objectContaining({ key: keyOf(TARGET) }),
      });
    } finally {
      await cache.close();
    }
  });
});

describe('missing shards', () => {
  it('a model whose index names a missing shard fails to open with an error naming it', async () => {
    const dir = join(root, 'model-missing-shard');
    const broken = await writeModel(dir, standardTensors());
    const shardName = broken.shards[1]?.name as string;
    await broken.close();
    await unlink(join(dir, shardName));
    await expect(openSafetensorsModel(join(dir, 'model.safetensors.index.json'))).rejects.toMatchObject({
      code: 'INDEX_SHARD_MISSING',
    });
  });

  it('a shard deleted after opening gives SHARD_READ_FAILED naming the file', async () => {
    const dir = join(root, 'model-deleted-shard');
    const opened = await writeModel(dir, standardTensors());
    try {
      const info = opened.getTensor('layer.0.norm');
      await unlink(info?.shardPath as string);
      const reader = createFileReader();
      await expect(loadTensor({ model: opened, name: 'layer.0.norm' }, { reader })).rejects.toMatchObject({
        code: 'SHARD_READ_FAILED',
        details: expect.objectContaining({ tensor: 'layer.0.norm', path: info?.shardPath, shard: info?.slice.shardName }),
      });
      await reader.close();
    } finally {
      await opened.close();
    }
  });

  it('a closed cache handle: every later load, lookup, alias, refresh or pool is CACHE_CLOSED, a RuntimeError', async () => {
    const { cacheDir } = await freshCache();
    const cache = await openShardCache(cacheDir);
    await cache.close();
    const { shardName, offsetBytes, sizeBytes } = model.getTensor(TARGET)!.slice;
    const rawOnly = model.tensors.find((t) => t.dtype !== 'BF16')!.name;
    const closed = { code: 'CACHE_CLOSED', name: 'RuntimeError', details: { root: cache.root } };
    await expect(loadTensor({ model, name: TARGET }, { cache })).rejects.toMatchObject(closed);
    await expect(loadTensor({ model, name: rawOnly }, { cache })).rejects.toMatchObject(closed);
    await expect(loadModel(model, cache).drain()).rejects.toMatchObject(closed);
    await expect(loadModel(model, cache, { refresh: false }).drain()).rejects.toMatchObject(closed);
    await expect(cache.refresh()).rejects.toMatchObject(closed);
    await expect(cache.aliasSlice('0'.repeat(40), 'x.safetensors', 0, 2)).rejects.toMatchObject(closed);
    expect(() => cache.lookupBySlice(shardName, offsetBytes, sizeBytes)).toThrow(expect.objectContaining(closed));
    expect(() => cache.createStagingPool({ slotCount: 1 })).toThrow(expect.objectContaining(closed));
    expect(() => cache.borrowStagingPool({ slotBytes: 1024, slotCount: 1 })).toThrow(expect.objectContaining(closed));
    // Without the cache, the same model still loads raw.
    expect(sameBytes((await loadTensor({ model, name: TARGET }, {})).data, raw.get(TARGET)!)).toBe(true);
  });

  it('a cache directory without a manifest is CACHE_OPEN_FAILED', async () => {
    await expect(openShardCache(join(root, 'no-such-cache'))).rejects.toMatchObject({ code: 'CACHE_OPEN_FAILED' });
  });

  it('model locations: an s3:// object instead of its prefix, and a mistyped URL, are INVALID_ARGUMENT (nothing is fetched or created)', async () => {
    for (const location of ['s3://bucket/dir/model.safetensors.index.json', 's3://bucket/dir/model.safetensors']) {
      await expect(openModel(location)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('s3://bucket/dir/') });
    }
    for (const location of ['S3://bucket/dir', 's3:/bucket/dir']) {
      await expect(openModel(location)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('looks like a URL') });
      await expect(openShardCache(location)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('looks like a URL') });
    }
  });

  it('an option the store refuses is INVALID_ARGUMENT, not CACHE_OPEN_FAILED (which a loader takes for "no cache here")', async () => {
    const { cacheDir } = await freshCache();
    for (const refreshIntervalMs of [0, -5, Infinity, 'abc' as never]) {
      await expect(openShardCache(cacheDir, { refreshIntervalMs })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('refreshIntervalMs') });
    }
    await expect(openShardCache('s3://bucket/cache', { s3: { maxAttempts: 0 } })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
