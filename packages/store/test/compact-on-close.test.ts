// compactOnClose: 'when-due' (what a loader opens with): a handle that wrote a few bindings leaves
// them in the journal instead of rewriting the whole manifest on close, and compacts once the
// journal outgrows max(CLOSE_COMPACT_MIN_JOURNAL_BYTES, manifest / CLOSE_COMPACT_MANIFEST_DIVISOR).
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { CLOSE_COMPACT_MIN_JOURNAL_BYTES, openCacheStore } from '../src/index.js';
import { catchError, makeCache, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

const journals = async (root: string) => (await readdir(root)).filter((name) => name.startsWith('journal.')).sort();

it("'when-due': one binding stays in the journal, the manifest is not rewritten, and every handle sees the binding", async () => {
  const { root, tensors } = await makeCache(2);
  const manifestBefore = await readFile(join(root, 'manifest.json'));
  const journalsBefore = await journals(root);
  const store = await openCacheStore(root, { compactOnClose: 'when-due' });
  expect(await store.aliasSlice(tensors[0]!.key, 'other-shard', 0, 240)).toBe(true);
  await store.close();
  expect(await readFile(join(root, 'manifest.json'))).toEqual(manifestBefore);
  expect(await journals(root)).toEqual(journalsBefore);
  const reader = await openCacheStore(root);
  expect(reader.lookupBySlice('other-shard', 0, 240)?.key).toBe(tensors[0]!.key);
  await reader.close();
});

it("'when-due' compacts on close once the journal outgrows CLOSE_COMPACT_MIN_JOURNAL_BYTES (a small manifest)", async () => {
  const { root, tensors } = await makeCache(1);
  const manifestBefore = await readFile(join(root, 'manifest.json'));
  expect(manifestBefore.length / 16).toBeLessThan(CLOSE_COMPACT_MIN_JOURNAL_BYTES);
  const store = await openCacheStore(root, { compactOnClose: 'when-due' });
  // Bindings one commit each, until the journal holds more than the threshold.
  let count = 0;
  for (; count < 4000; count += 1) {
    await store.aliasSlice(tensors[0]!.key, `shard-with-a-long-enough-name-${count}`, 0, 240);
    const journal = (await journals(root)).at(-1)!;
    if ((await readFile(join(root, journal))).length > CLOSE_COMPACT_MIN_JOURNAL_BYTES + 64) break;
  }
  expect(count).toBeLessThan(4000);
  await store.close();
  const manifestAfter = await readFile(join(root, 'manifest.json'), 'utf8');
  expect(manifestAfter).toContain(`shard-with-a-long-enough-name-${count}`);
  const reader = await openCacheStore(root);
  expect(reader.lookupBySlice(`shard-with-a-long-enough-name-${count}`, 0, 240)?.key).toBe(tensors[0]!.key);
  await reader.close();
});

it('the default (true) still compacts on close after one binding', async () => {
  const { root, tensors } = await makeCache(1);
  const store = await openCacheStore(root);
  await store.aliasSlice(tensors[0]!.key, 'other-shard', 0, 240);
  await store.close();
  expect(await readFile(join(root, 'manifest.json'), 'utf8')).toContain('other-shard');
});

it('any other value is INVALID_ARGUMENT', async () => {
  const { root } = await makeCache(1);
  const error = await catchError(() => openCacheStore(root, { compactOnClose: 'always' as never }));
  expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
  expect(error.message).toMatch(/compactOnClose/);
});
