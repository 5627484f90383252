import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SafetensorsModel } from '@splitzip/safetensors';
import type { DecodeBackend } from '../src/create-cpu-decoder.js';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { nameEntryAndBlob, type ServeTarget } from '../src/serve-tensor.js';
import { RuntimeError } from '../src/errors.js';
import type { CacheEntry } from '@splitzip/store';
import { bf16Weights, buildCache, makeTempDir, writeModel } from './fixtures.js';

// A blob whose checksum fails is named, entry key and blob file, on every path that can find it:
// the store's readBlob (which named the entry), the runtime's own reader (which named the blob), a
// backend that verifies as it decodes, the decode threads (which named neither: only the tensor,
// `w: payload checksum: CHECKSUM_MISMATCH…`), and a payload decoded as it streams in.
let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let cache: ShardCache;
let keys: Map<string, string>;
let cacheDir: string;
const threadDecoders: ReturnType<typeof createThreadDecoder>[] = [];

// `w` is small; `big` has two checksum segments, so a custom reader's load of it streams.
const BIG_VALUES = (1 << 20) + 4096;

beforeAll(async () => {
  const temp = await makeTempDir('blob-failure-names');
  cleanup = temp.cleanup;
  model = await writeModel(join(temp.dir, 'model'), [
    { name: 'w', dtype: 'BF16', shape: [64, 80], data: bf16Weights(5120, 31) },
    { name: 'big', dtype: 'BF16', shape: [BIG_VALUES], data: bf16Weights(BIG_VALUES, 32) },
  ], 8 * 1024 * 1024);
  cacheDir = join(temp.dir, 'cache');
  keys = await buildCache(model, cacheDir);
  // A bit flipped in each payload's body (past the header): only the checksum can tell.
  for (const name of ['w', 'big']) {
    const bytes = await readFile(blobOf(name));
    const at = Math.floor(bytes.length * 0.6);
    bytes[at] = (bytes[at] as number) ^ 0x10;
    await writeFile(blobOf(name), bytes);
  }
  cache = await openShardCache(cacheDir);
});
afterAll(async () => {
  for (const threads of threadDecoders) await threads.close?.();
  await cache?.close();
  await model?.close();
  await cleanup?.();
});

function blobOf(name: string): string {
  return join(cacheDir, 'blobs', `${keys.get(name)}.bin`);
}

function threads(options: Parameters<typeof createThreadDecoder>[0]): DecodeBackend {
  const decoder = createThreadDecoder(options);
  threadDecoders.push(decoder);
  return decoder;
}

const modes: Record<string, () => { reader?: ByteReader; backend: 'cpu' | DecodeBackend }> = {
  'the store verifies (cpu)': () => ({ backend: 'cpu' }),
  'the thread decoder verifies as it decodes, on the loading thread': () => ({ backend: threads({ threads: 2 }) }),
  'the decode threads read and verify': () => ({ backend: threads({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 }) }),
  'the runtime reader, the decode threads verify': () => ({ reader: createFileReader(), backend: threads({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 }) }),
  'the runtime reader, checked on the loading thread (big: streamed)': () => ({ reader: createFileReader(), backend: 'cpu' }),
};

describe('a checksum failure names the entry and its blob', () => {
  for (const [mode, makeMode] of Object.entries(modes)) {
    it.each(['w', 'big'])(`${mode}: %s`, async (name) => {
      const { reader, backend } = makeMode();
      const key = keys.get(name) as string;
      const named = `cache entry ${key} (${name}): blob ${blobOf(name)}: `;
      try {
        const load = loadModel(model, cache, { reader, backend, filter: (t) => t.name === name });
        await load.drain();
        const [report] = load.reports;
        expect(report).toMatchObject({ name, source: 'raw', reason: 'cache-failed', key, error: { code: 'CACHE_READ_FAILED' } });
        expect(report?.error?.message).toContain(named);
        expect(report?.detail).toContain(named);
        if (mode.endsWith('(big: streamed)') && name === 'big') expect(report?.streamed).toBe(true);
        const error = await loadTensor({ model, name }, { cache, reader, backend, cacheOnly: true }).catch((reason: unknown) => reason);
        expect(error).toMatchObject({ code: 'CACHE_READ_FAILED', details: { tensor: name, key, qualname: name, blob: blobOf(name) } });
        expect((error as Error).message.startsWith(`${name}: ${named}`), (error as Error).message).toBe(true);
        expect((error as Error).message).toMatch(/CHECKSUM_MISMATCH|checksum/);
      } finally {
        await reader?.close();
      }
    });
  }
});

describe('nameEntryAndBlob', () => {
  const entry = { key: 'k1', qualname: 'q' } as unknown as CacheEntry;
  const target = { name: 'alias' } as unknown as ServeTarget;
  const store = { blobPath: () => '/c/blobs/k1.bin' } as unknown as ShardCache;

  // The manifest's entry disagreeing with the tensor is not the blob's fault: the message read
  // `blob /c/blobs/k1.bin: cache entry k1 (…) does not describe alias`.
  it('leaves an entry-level mismatch in its own words, the blob only in details', () => {
    const message = 'cache entry k1 (BF16 [2], 4 B) does not describe alias (BF16 [1], 2 B)';
    const named = nameEntryAndBlob(new RuntimeError('CACHE_ENTRY_MISMATCH', message, { tensor: 'alias' }), target, entry, store);
    expect(named.message).toBe(message);
    expect(named.details).toMatchObject({ tensor: 'alias', key: 'k1', qualname: 'q', blob: '/c/blobs/k1.bin' });
  });

  // A payload whose header disagrees with the tensor (serve-tensor's element-count check, behind the
  // store's own checks) read `cache entry k1 (q): blob P: blob of k1 holds …`: blob and key twice.
  it('names a payload mismatch once, entry then blob', () => {
    const raw = new RuntimeError('CACHE_ENTRY_MISMATCH', 'its payload holds 3 values, alias has 1', {});
    expect(nameEntryAndBlob(raw, target, entry, store).message).toBe('cache entry k1 (q): blob /c/blobs/k1.bin: its payload holds 3 values, alias has 1');
  });
});
