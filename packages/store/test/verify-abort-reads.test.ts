// An abort ends verify without reading more: the checks started beside the one that was going
// (waiting for their memory, behind blobs above VERIFY_IN_FLIGHT_BYTES read one at a time) read
// nothing once the signal is aborted, as the one-at-a-time loop read nothing after it.
import { expect, it } from 'vitest';
import type { VerifyBackend } from '../src/blob-range-reader.js';
import type { CacheEntry } from '../src/index.js';
import { verifyEntries } from '../src/verify-entries.js';

const MiB = 2 ** 20;
const base = {
  qualname: 'q', shape: [1], dtype: 'BF16', rawBytes: 2, sha256: null, blobSha256: null, sliceKeys: [],
  meta: { version: 2, elementCount: 1, chunkSize: 64, chunkCount: 1, escapeCount: 0, compBytes: 0, rawBytes: 2, checksum: 0 },
} as unknown as CacheEntry;

async function readsAfterAbortWith(verifyConcurrency: number | undefined): Promise<string[]> {
  const entries = Array.from({ length: 16 }, (_, i): CacheEntry => ({ ...base, key: i.toString(16).padStart(40, '0'), blob: `blobs/${i.toString(16).padStart(40, '0')}.bin`, compBytes: 40 * MiB }));
  const controller = new AbortController();
  let aborted = false;
  const readsAfterAbort: string[] = [];
  const backend: VerifyBackend = {
    verifyConcurrency,
    readBlobInto: async (key, _blob, _target) => {
      if (aborted) readsAfterAbort.push(key);
      await new Promise((r) => setTimeout(r, 5));
    },
  };
  const run = verifyEntries(backend, entries, 0, {
    signal: controller.signal,
    onProgress: (p) => {
      if (p.done === 1) {
        aborted = true;
        controller.abort(new Error('stop'));
      }
    },
  });
  await expect(run).rejects.toThrow('stop');
  return readsAfterAbort;
}

it('reads no blob after the abort found at the first entry event', async () => {
  // One at a time:
  expect(await readsAfterAbortWith(1)).toEqual([]);
  // Several at once (the default): the checks queued for the one large buffer read nothing either.
  expect(await readsAfterAbortWith(undefined)).toEqual([]);
});
