// A custom reader that fails a read with an ABORTED RuntimeError of its own (its own timeout, a
// connection it gave up on) while the load's signal has not fired: a read that failed, as any
// reader error — the cache path falls back to a raw read (CACHE_READ_FAILED, cache-failed), and a
// raw read is SHARD_READ_FAILED. It passed through as the load's ABORTED before: no fallback, and
// a load nobody aborted reported as aborted.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEGMENT_VALUES } from '@splitzip/codec';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { createCpuDecoder } from '../src/create-cpu-decoder.js';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { RuntimeError } from '../src/errors.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';

const S = SEGMENT_VALUES;
const TENSORS: FixtureTensor[] = [
  // One segment: its payload staged whole.
  { name: 'small', dtype: 'BF16', shape: [3001], data: bf16Weights(3001, 1) },
  // Three segments: streamed, decoded as its spans come in.
  { name: 'three', dtype: 'BF16', shape: [3, S - 5], data: bf16Weights(3 * (S - 5), 4, 0.004) },
];

let root: string;
let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let cache: ShardCache;
let raw: Map<string, Uint8Array>;
beforeAll(async () => {
  const temp = await makeTempDir('reader-own-abort');
  root = temp.dir;
  cleanup = temp.cleanup;
  model = await writeModel(join(root, 'model'), TENSORS, 8 * 1024 * 1024);
  raw = await readAllRaw(model);
  await buildCache(model, join(root, 'cache'));
  cache = await openShardCache(join(root, 'cache'));
}, 60_000);
afterAll(async () => {
  await cache?.close();
  await model?.close();
  await cleanup?.();
});

/** A reader that fails the reads `failsOn` accepts with its own ABORTED (a timeout of its own). */
function createTimingOutReader(failsOn: (path: string) => boolean): ByteReader {
  const inner = createFileReader();
  return {
    async readExact(path, target, positionBytes) {
      if (failsOn(path)) throw new RuntimeError('ABORTED', `${path}: the reader's own timeout`, { path });
      await inner.readExact(path, target, positionBytes);
    },
    close: () => inner.close(),
  };
}

describe("a reader's own ABORTED, the load not aborted", () => {
  it.each([
    ['staged', 'small', false],
    ['streamed', 'three', true],
  ] as const)('from the cache (%s): CACHE_READ_FAILED, the tensor read raw', async (_label, name, streamed) => {
    const reader = createTimingOutReader((path) => path.endsWith('.bin'));
    try {
      const tensor = await loadTensor({ model, name }, { cache, reader, backend: createCpuDecoder(), signal: new AbortController().signal });
      expect(tensor.source).toBe('raw');
      expect(tensor.reason).toBe('cache-failed');
      expect(tensor.report.streamed === true).toBe(streamed);
      expect(tensor.report.error).toMatchObject({ code: 'CACHE_READ_FAILED', message: expect.stringContaining("the reader's own timeout") });
      expect(sameBytes(tensor.data, raw.get(name)!)).toBe(true);
    } finally {
      await reader.close();
    }
  });

  it('raw: SHARD_READ_FAILED, its cause the reader\'s error', async () => {
    const reader = createTimingOutReader((path) => path.endsWith('.safetensors'));
    try {
      const error = await loadTensor({ model, name: 'small' }, { reader, signal: new AbortController().signal }).catch((thrown: unknown) => thrown);
      expect(error).toMatchObject({ code: 'SHARD_READ_FAILED', details: expect.objectContaining({ tensor: 'small', causeCode: 'ABORTED' }) });
      expect((error as Error).cause).toMatchObject({ code: 'ABORTED', message: expect.stringContaining("the reader's own timeout") });
    } finally {
      await reader.close();
    }
  });

  it('the load aborted too: ABORTED, the signal\'s reason its cause', async () => {
    const controller = new AbortController();
    const reason = new Error('client went away');
    const inner = createFileReader();
    const reader: ByteReader = {
      async readExact() {
        controller.abort(reason);
        await new Promise<void>((resolve) => setImmediate(resolve));
        throw Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
      },
      close: () => inner.close(),
    };
    try {
      const error = await loadTensor({ model, name: 'small' }, { cache, reader, backend: createCpuDecoder(), signal: controller.signal }).catch((thrown: unknown) => thrown);
      expect(error).toMatchObject({ code: 'ABORTED' });
      expect((error as Error).cause).toBe(reason);
    } finally {
      await reader.close();
    }
  });
});
