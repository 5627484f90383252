// Object stamps as a file identity in a directory cache (FILE-BINDINGS.md phase 3): revisions of an
// s3:// model, their bindings stamped `etag:"…"` only, side by side at one slice; the cache moves to
// manifest format 4 / journal version 3 only when a slice first holds such a binding beside another,
// never for a load's record (besideOnlyIfSeveral); replay, compaction and a crash agree.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { signManifestText } from '@splitzip/test-support/manifest';
import { FsCacheStore } from '../src/cache-store.js';
import { MAX_SLICE_BINDINGS, openCacheStore, type CacheStore } from '../src/index.js';
import { JOURNAL_HEADER_BYTES, encodeJournalRecords } from '../src/journal-format.js';
import { createCrashCopyBackend } from './crash-copies.js';
import { catchError, removeTempDirs, type TestTensor } from './helpers.js';
import { fileStamp, makeUnboundCache } from './unbound-cache.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
const FIRST_SEED = 700;
/** Revision n's object stamp (an ETag of 32 hex digits). */
const etag = (n: number): string => `etag:"${n.toString(16).padStart(32, '0')}"`;

const alias = (key: string, stamp?: string) => ({ key, ...SLICE, ...(stamp === undefined ? {} : { stamp }) });

async function manifestHeader(root: string): Promise<{ format: number; generation: number }> {
  return JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { format: number; generation: number };
}

async function journalVersion(root: string): Promise<number> {
  const { generation } = await manifestHeader(root);
  return (await readFile(join(root, `journal.${generation}`))).readUInt32LE(8);
}

function keysOf(store: CacheStore): string[] {
  return store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((b) => b.entry.key);
}

function bindingFor(store: CacheStore, stamp?: string) {
  return store.lookupSliceBinding(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes, stamp);
}

describe('object revisions in one directory cache', () => {
  it('two object revisions bound side by side, each found (trusted) by its ETag; format 4 / journal 3; the same from the journal and after compaction', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    expect(await store.aliasSlices([alias(a.key, etag(1))])).toEqual([true]);
    expect(store.holdsObjectBindingsBeside).toBe(false);
    // Before phase 3: SLICE_CONFLICT (a binding beside another needed a file stamp).
    expect(await store.aliasSlices([alias(b.key, etag(2))])).toEqual([true]);
    expect(store.holdsObjectBindingsBeside).toBe(true);
    expect(await manifestHeader(root)).toMatchObject({ format: 4 });
    expect(await journalVersion(root)).toBe(3);
    const sorted = [a.key, b.key].sort();
    const check = (s: CacheStore): void => {
      expect(bindingFor(s, etag(1))?.entry.key).toBe(a.key);
      expect(bindingFor(s, etag(1))?.stamps).toEqual([etag(1)]);
      expect(bindingFor(s, etag(2))?.entry.key).toBe(b.key);
      // No file stamp: by key; the latest (a stampless lookup, an unknown ETag) is the lowest key.
      expect(keysOf(s)).toEqual(sorted);
      expect(bindingFor(s)?.entry.key).toBe(sorted[0]);
      expect(bindingFor(s, etag(3))?.entry.key).toBe(sorted[0]);
    };
    check(store);
    await store.close();
    const fromJournal = await openCacheStore(root, { compactOnClose: false });
    check(fromJournal);
    await fromJournal.compact();
    expect(await manifestHeader(root)).toMatchObject({ format: 4 });
    await fromJournal.close();
    const compacted = await openCacheStore(root);
    check(compacted);
    // Unbound again: the next manifest goes back to format 2.
    expect(await compacted.unbindSlices([{ ...SLICE, key: b.key }])).toBe(1);
    expect(compacted.holdsObjectBindingsBeside).toBe(false);
    expect(await manifestHeader(root)).toMatchObject({ format: 2 });
    await compacted.close();
  });

  it('a file-stamped and an object-stamped revision side by side: the file binding is the latest', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    expect(await store.aliasSlices([alias(b.key, etag(2))])).toEqual([true]);
    expect(await store.aliasSlices([alias(a.key, fileStamp(1))])).toEqual([true]);
    expect(keysOf(store)).toEqual([a.key, b.key]);
    expect(bindingFor(store, fileStamp(1))?.entry.key).toBe(a.key);
    expect(bindingFor(store, etag(2))?.entry.key).toBe(b.key);
    expect(bindingFor(store)?.entry.key).toBe(a.key);
    expect(store.holdsObjectBindingsBeside).toBe(true);
    await store.close();
    expect(await manifestHeader(root)).toMatchObject({ format: 4 });
    const reopened = await openCacheStore(root);
    expect(keysOf(reopened)).toEqual([a.key, b.key]);
    await reopened.close();
  });

  it('an ETag held by one binding only; a stampless alias still conflicts; a handle without sliceBindingsPerFile adds none beside', async () => {
    const { root, tensors } = await makeUnboundCache(3, FIRST_SEED);
    const [a, b, c] = tensors as [TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, etag(1))]);
    expect((await catchError(() => store.aliasSlices([alias(b.key, etag(1))]))).code).toBe('SLICE_CONFLICT');
    expect((await catchError(() => store.aliasSlices([alias(b.key)]))).code).toBe('SLICE_CONFLICT');
    // A handle without sliceBindingsPerFile adds nothing beside.
    const plain = await openCacheStore(root);
    expect((await catchError(() => plain.aliasSlices([alias(c.key, etag(3))]))).code).toBe('SLICE_CONFLICT');
    await plain.close();
    expect(await store.aliasSlices([alias(c.key, etag(3))])).toEqual([true]);
    expect(keysOf(store).sort()).toEqual([a.key, c.key].sort());
    await store.close();
  });
});

describe('the format moves only by a build or an explicit alias, never by a load', () => {
  it('besideOnlyIfSeveral: not on a format-2 cache, nor on a format-3 one (file bindings beside only); on a format-4 one it binds', async () => {
    const { root, tensors } = await makeUnboundCache(5, FIRST_SEED);
    const [a, b, c, d, e] = tensors as [TestTensor, TestTensor, TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    const refused: string[] = [];
    const onBesideRefused = (_slice: unknown, key: string): void => void refused.push(key);
    await store.aliasSlices([alias(a.key, etag(1))]);
    expect(await store.aliasSlices([{ ...alias(b.key, etag(2)), besideOnlyIfSeveral: true }], { onBesideRefused })).toEqual([false]);
    expect(await manifestHeader(root)).toMatchObject({ format: 2 });
    // Format 3: a file binding beside a file binding, at another slice.
    const other = { shardName: SHARD, offsetBytes: 480, sizeBytes: 480 };
    await store.aliasSlices([{ key: c.key, ...other, stamp: fileStamp(3) }, { key: d.key, ...other, stamp: fileStamp(4) }]);
    expect(store.holdsSeveralBindings).toBe(true);
    expect(await manifestHeader(root)).toMatchObject({ format: 3 });
    expect(await store.aliasSlices([{ ...alias(b.key, etag(2)), besideOnlyIfSeveral: true }], { onBesideRefused })).toEqual([false]);
    expect(refused).toEqual([b.key, b.key]);
    expect(await manifestHeader(root)).toMatchObject({ format: 3 });
    expect(keysOf(store)).toEqual([a.key]);
    // An explicit alias (a build) moves it to format 4; then a load's record binds beside.
    expect(await store.aliasSlices([alias(b.key, etag(2))])).toEqual([true]);
    expect(await manifestHeader(root)).toMatchObject({ format: 4 });
    expect(await store.aliasSlices([{ ...alias(e.key, etag(5)), besideOnlyIfSeveral: true }], { onBesideRefused })).toEqual([true]);
    expect(keysOf(store).sort()).toEqual([a.key, b.key, e.key].sort());
    await store.close();
  });
});

describe('older readers and damage', () => {
  it('what 0.57 refuses cleanly: manifest format 4 and journal version 3 (its UNSUPPORTED_FORMAT), written only with an object binding beside', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2))]);
    // File bindings only: still format 3, which 0.57 reads.
    expect(await manifestHeader(root)).toMatchObject({ format: 3 });
    expect(await journalVersion(root)).toBe(2);
    await store.unbindSlices([{ ...SLICE, key: b.key }]);
    await store.aliasSlices([alias(b.key, etag(2))]);
    await store.close();
    // 0.57's checks (git show 5ff77ed:packages/store/src/{manifest,journal}-format.ts): a format other
    // than 2 or 3 is UNSUPPORTED_FORMAT ("written by a newer release" for 4), a journal version 3
    // (its MAX_NEWER_JOURNAL_VERSION) too, before any entry or record is read.
    expect(await manifestHeader(root)).toMatchObject({ format: 4 });
    expect(await journalVersion(root)).toBe(3);
    // This release likewise refuses the format after its own.
    const text = await readFile(join(root, 'manifest.json'), 'utf8');
    const { body_crc32: _dropped, ...rest } = JSON.parse(text) as Record<string, unknown>;
    await writeFile(join(root, 'manifest.json'), signManifestText(JSON.stringify({ ...rest, format: 5 })));
    expect((await catchError(() => openCacheStore(root))).code).toBe('UNSUPPORTED_FORMAT');
  });

  it('a version-2 journal record adding an object binding beside is damage (JOURNAL_INVALID invalid-ops); in a version-3 journal it applies', async () => {
    for (const version of [2, 3]) {
      const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
      const [a, b] = tensors as [TestTensor, TestTensor];
      const store = await openCacheStore(root);
      await store.aliasSlices([alias(a.key, etag(1))]);
      await store.compact();
      await store.close();
      const path = join(root, `journal.${(await manifestHeader(root)).generation}`);
      const journal = await readFile(path);
      expect(journal.length).toBe(JOURNAL_HEADER_BYTES);
      journal.writeUInt32LE(version, 8);
      const record = encodeJournalRecords([{ kind: 'alias', key: b.key, slice: [SHARD, 0, 480, [etag(2)]] }]);
      await writeFile(path, Buffer.concat([journal, record]));
      const reader = await openCacheStore(root, { compactOnClose: false });
      if (version === 2) {
        expect(reader.journalDamage?.code).toBe('JOURNAL_INVALID');
        expect(reader.journalDamage?.details.reason).toBe('invalid-ops');
        expect(keysOf(reader)).toEqual([a.key]);
      } else {
        expect(reader.journalDamage).toBeUndefined();
        expect(keysOf(reader).sort()).toEqual([a.key, b.key].sort());
      }
      await reader.close();
    }
  });

  it('an op leaving a binding with only an object stamp beside another: dropped by a version-2 journal\'s replay (as 0.57 did live) and by a handle without sliceBindingsPerFile on a format-3 cache; kept at version 3, and by a handle binding objects beside (format 4)', async () => {
    /** A format-3 cache: A bound with file 1 and an object checked against it, B beside with file 2. */
    const makeFormat3 = async () => {
      const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
      const [a, b] = tensors as [TestTensor, TestTensor];
      const store = await openCacheStore(root, { sliceBindingsPerFile: true });
      expect(await store.aliasSlices([alias(a.key, fileStamp(1))])).toEqual([true]);
      expect(await store.aliasSlices([alias(a.key, etag(1))])).toEqual([true]);
      expect(await store.aliasSlices([alias(b.key, fileStamp(2))])).toEqual([true]);
      await store.compact();
      await store.close();
      expect(await manifestHeader(root)).toMatchObject({ format: 3 });
      return { root, a, b };
    };
    // B re-stamped with file 1's stamp as well: A is left with only its ETag.
    const restamp = (b: TestTensor) => ({ kind: 'alias' as const, key: b.key, slice: [SHARD, 0, 480, [fileStamp(2), fileStamp(1)]] as [string, number, number, string[]] });
    for (const version of [2, 3]) {
      const { root, a, b } = await makeFormat3();
      const path = join(root, `journal.${(await manifestHeader(root)).generation}`);
      const journal = await readFile(path);
      expect(journal.length).toBe(JOURNAL_HEADER_BYTES);
      journal.writeUInt32LE(version, 8);
      await writeFile(path, Buffer.concat([journal, encodeJournalRecords([restamp(b)])]));
      const reader = await openCacheStore(root, { compactOnClose: false });
      expect(reader.journalDamage).toBeUndefined();
      // Before: A kept beside B at either version (a format-3 cache then held an object binding beside).
      expect(keysOf(reader).sort()).toEqual(version === 2 ? [b.key] : [a.key, b.key].sort());
      expect(reader.holdsObjectBindingsBeside).toBe(version === 3);
      expect(reader.getEntry(a.key)?.sliceKeys.length).toBe(version === 2 ? 0 : 1);
      await reader.close();
    }
    // Live: the same op, a handle of each kind; what it leaves is what its journal replays.
    for (const perFile of [false, true]) {
      const { root, a, b } = await makeFormat3();
      const store = await openCacheStore(root, { sliceBindingsPerFile: perFile, compactOnClose: false });
      expect(await store.aliasSlices([alias(b.key, fileStamp(1))])).toEqual([true]);
      const live = keysOf(store).sort();
      expect(live).toEqual(perFile ? [a.key, b.key].sort() : [b.key]);
      await store.close();
      expect(await manifestHeader(root)).toMatchObject({ format: perFile ? 4 : 3 });
      const reopened = await openCacheStore(root, { compactOnClose: false });
      expect(reopened.journalDamage).toBeUndefined();
      expect(keysOf(reopened).sort()).toEqual(live);
      await reopened.close();
    }
  });
});

describe('eviction and crashes', () => {
  it('past MAX_SLICE_BINDINGS a new object binding is kept and the last of the others (by key) goes; a replay and a compaction agree', async () => {
    const count = MAX_SLICE_BINDINGS + 1;
    const { root, tensors } = await makeUnboundCache(count, FIRST_SEED);
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    for (let i = 0; i < MAX_SLICE_BINDINGS; i++) expect(await store.aliasSlices([alias(tensors[i]!.key, etag(i + 1))])).toEqual([true]);
    const before = keysOf(store);
    expect(before).toHaveLength(MAX_SLICE_BINDINGS);
    const dropped: string[] = [];
    const last = tensors[count - 1]!.key;
    expect(await store.aliasSlices([alias(last, etag(count))], { onBindingDropped: (_slice, key) => dropped.push(key) })).toEqual([true]);
    // Before phase 3 the first beside binding was SLICE_CONFLICT already.
    expect(dropped).toEqual([before.at(-1)]);
    const after = keysOf(store);
    expect(after).toContain(last);
    expect(after).toEqual([...before.slice(0, -1), last].sort());
    await store.close();
    const replayed = await openCacheStore(root, { compactOnClose: false });
    expect(keysOf(replayed)).toEqual(after);
    await replayed.compact();
    await replayed.close();
    const compacted = await openCacheStore(root);
    expect(keysOf(compacted)).toEqual(after);
    await compacted.close();
  });

  it('the first object binding beside (a compaction to format 4): a crash at any step leaves the bindings before or after it', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const first = await openCacheStore(root, { sliceBindingsPerFile: true });
    await first.aliasSlices([alias(a.key, etag(1))]);
    await first.close();
    const { backend, copies } = createCrashCopyBackend(root);
    const store = await FsCacheStore.load(backend, { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false, sliceBindingsPerFile: true });
    expect(await store.aliasSlices([alias(b.key, etag(2))])).toEqual([true]);
    await store.close();
    expect(copies.map((c) => c.step)).toContain('before writing the manifest');
    const states = { before: JSON.stringify([a.key]), after: JSON.stringify([a.key, b.key].sort()) };
    const outcomes: string[] = [];
    for (const { step, path } of copies) {
      const copy = await openCacheStore(path, { compactOnClose: false });
      const keys = JSON.stringify(keysOf(copy));
      expect([states.before, states.after], `${step}: ${keys}`).toContain(keys);
      expect((await copy.verify({ decode: true })).problems, step).toEqual([]);
      outcomes.push(keys === states.before ? 'before' : 'after');
      expect(bindingFor(copy, etag(1))?.entry.key, step).toBe(a.key);
      await copy.close();
      const writer = await openCacheStore(path, { compactOnClose: false });
      await writer.gc();
      await writer.compact();
      expect(JSON.stringify(keysOf(writer)), `${step}, after a writer`).toBe(keys);
      await writer.close();
    }
    expect(outcomes[0]).toBe('before');
    expect(outcomes.at(-1)).toBe('after');
  });
});
