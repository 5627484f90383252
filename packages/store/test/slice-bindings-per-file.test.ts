// One binding per file (FILE-BINDINGS.md, phase 1): a handle opened with sliceBindingsPerFile binds
// a slice bound to other files' entries beside them; lookups by stamp find each file's entry; the
// cache is format 3 / journal 2 only once it holds such a binding; MAX_SLICE_BINDINGS evicts.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SLICE_BINDINGS, openCacheStore, type CacheStore, type SliceKeyTuple } from '../src/index.js';
import { JOURNAL_HEADER_BYTES, encodeJournalRecords } from '../src/journal-format.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';
import { fileStamp, makeUnboundCache } from './unbound-cache.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
/** makeUnboundCache's first seed here (the keys, whose order breaks ties, these cases were written against). */
const FIRST_SEED = 100;
/** A file stamp of revision `n`: its own inode, a later ctime for a later revision. */
const OBJECT_STAMP = 'etag:"0123456789abcdef0123456789abcdef"';

const alias = (key: string, stamp?: string) => ({ key, ...SLICE, ...(stamp === undefined ? {} : { stamp }) });

async function manifestFormat(root: string): Promise<number> {
  return (JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { format: number }).format;
}

async function journalVersion(root: string, generation: number): Promise<number> {
  return (await readFile(join(root, `journal.${generation}`))).readUInt32LE(8);
}

function keysOf(store: CacheStore): string[] {
  return store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((b) => b.entry.key);
}

function keyFor(store: CacheStore, stamp?: string): string | undefined {
  return store.lookupSliceBinding(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes, stamp)?.entry.key;
}

describe('three revisions side by side', () => {
  it('each stamp finds its own entry, an unknown one the latest; the same after reopening from the journal and after compaction', async () => {
    const { root, tensors } = await makeUnboundCache(3, FIRST_SEED);
    const [a, b, c] = tensors as [TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    expect(await store.aliasSlices([alias(a.key, fileStamp(1))])).toEqual([true]);
    expect(await store.aliasSlices([alias(b.key, fileStamp(2))])).toEqual([true]);
    expect(await store.aliasSlices([alias(c.key, fileStamp(3))])).toEqual([true]);
    const check = (s: CacheStore): void => {
      expect(keyFor(s, fileStamp(1))).toBe(a.key);
      expect(keyFor(s, fileStamp(2))).toBe(b.key);
      expect(keyFor(s, fileStamp(3))).toBe(c.key);
      expect(keyFor(s, fileStamp(9))).toBe(c.key);
      expect(keyFor(s)).toBe(c.key);
      expect(s.lookupBySlice(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes)?.key).toBe(c.key);
      expect(keysOf(s)).toEqual([c.key, b.key, a.key]);
      expect(s.lookupSliceBinding(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes, fileStamp(2))?.stamps).toEqual([fileStamp(2)]);
    };
    check(store);
    await store.close();
    // Not compacted: the third binding is in the journal (version 2, after the compaction the second made).
    const fromJournal = await openCacheStore(root, { compactOnClose: false });
    expect(fromJournal.needsCompaction).toBe(true);
    check(fromJournal);
    // A handle without the option reads them, and compacts them.
    await fromJournal.compact();
    await fromJournal.close();
    expect(await manifestFormat(root)).toBe(3);
    const compacted = await openCacheStore(root);
    check(compacted);
    expect((await compacted.verify()).problems).toEqual([]);
    await compacted.close();
  });

  it('without the option the second file is SLICE_CONFLICT as before, and addEntries binds beside with it', async () => {
    const { root, tensors } = await makeUnboundCache(3, FIRST_SEED);
    const [a, b, c] = tensors as [TestTensor, TestTensor, TestTensor];
    const plain = await openCacheStore(root);
    await plain.aliasSlices([alias(a.key, fileStamp(1))]);
    expect((await catchError(() => plain.aliasSlices([alias(b.key, fileStamp(2))]))).code).toBe('SLICE_CONFLICT');
    await plain.close();
    const root2 = await makeTempDir();
    const store = await openCacheStore(root2, { create: true, sliceBindingsPerFile: true });
    const slice = (stamp: string): SliceKeyTuple => [SHARD, 0, 480, [stamp]];
    await store.addEntries([toInput(a, 'a', [slice(fileStamp(1))])]);
    await store.addEntries([toInput(b, 'b', [slice(fileStamp(2))])]);
    expect((await catchError(() => store.addEntries([toInput(c, 'c', [slice(fileStamp(2))])]))).code).toBe('SLICE_CONFLICT');
    expect(keysOf(store)).toEqual([b.key, a.key]);
    await store.close();
  });
});

describe('rule edges', () => {
  it('the same stamp for another entry is SLICE_CONFLICT; rebind moves only the binding holding it', async () => {
    const { root, tensors } = await makeUnboundCache(3, FIRST_SEED);
    const [a, b, c] = tensors as [TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2))]);
    const error = await catchError(() => store.aliasSlices([alias(c.key, fileStamp(1))]));
    expect(error.code).toBe('SLICE_CONFLICT');
    expect(error.details?.boundKey).toBe(a.key);
    expect(await store.aliasSlices([alias(c.key, fileStamp(1))], { rebind: true })).toEqual([true]);
    expect(keyFor(store, fileStamp(1))).toBe(c.key);
    expect(keyFor(store, fileStamp(2))).toBe(b.key);
    expect(keysOf(store).sort()).toEqual([b.key, c.key].sort());
    expect(store.getEntry(a.key)?.sliceKeys).toEqual([]);
    await store.close();
    const again = await openCacheStore(root);
    expect(keysOf(again).sort()).toEqual([b.key, c.key].sort());
    await again.close();
  });

  it("a file's stamp bound again to an entry leaves the other binding; one left without a file stamp goes (reported)", async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2))]);
    await store.aliasSlices([alias(a.key, fileStamp(3))]);
    // b's file now holds a's bytes: fileStamp(2) moves to a, and b's binding (no stamp left) goes.
    const dropped: [SliceKeyTuple, string][] = [];
    expect(await store.aliasSlices([alias(a.key, fileStamp(2))], { onBindingDropped: (slice, key) => dropped.push([slice, key]) })).toEqual([true]);
    expect(dropped).toEqual([[[SHARD, 0, 480], b.key]]);
    expect(keysOf(store)).toEqual([a.key]);
    await store.close();
  });

  it('a stampless binding takes no second one; an alias without a stamp conflicts; an object stamp binds beside (phase 3)', async () => {
    const { root, tensors } = await makeUnboundCache(3, FIRST_SEED);
    const [a, b, c] = tensors as [TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key)]);
    expect((await catchError(() => store.aliasSlices([alias(b.key, fileStamp(2))]))).code).toBe('SLICE_CONFLICT');
    expect((await catchError(() => store.aliasSlices([alias(b.key, OBJECT_STAMP)]))).code).toBe('SLICE_CONFLICT');
    // rebind moves the stampless binding (the only one).
    await store.aliasSlices([alias(b.key, fileStamp(2))], { rebind: true });
    expect(keysOf(store)).toEqual([b.key]);
    // No stamp never adds a binding; an object stamp does (FILE-BINDINGS.md phase 3).
    expect((await catchError(() => store.aliasSlices([alias(c.key)]))).code).toBe('SLICE_CONFLICT');
    expect(await store.aliasSlices([alias(c.key, OBJECT_STAMP)])).toEqual([true]);
    expect(keysOf(store).sort()).toEqual([b.key, c.key].sort());
    // A rebind with that object stamp moves only the binding holding it.
    await store.aliasSlices([alias(a.key, OBJECT_STAMP)], { rebind: true });
    expect(keysOf(store).sort()).toEqual([a.key, b.key].sort());
    await store.close();
  });

  it('moveFrom moves the binding holding the stamp when it is that entry, else leaves it (false)', async () => {
    const { root, tensors } = await makeUnboundCache(4, FIRST_SEED);
    const [a, b, c, d] = tensors as [TestTensor, TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2))]);
    expect(await store.aliasSlices([{ ...alias(c.key, fileStamp(1)), moveFrom: b.key }])).toEqual([false]);
    expect(keysOf(store).sort()).toEqual([a.key, b.key].sort());
    expect(await store.aliasSlices([{ ...alias(c.key, fileStamp(1)), moveFrom: a.key }])).toEqual([true]);
    expect(keyFor(store, fileStamp(1))).toBe(c.key);
    expect(keyFor(store, fileStamp(2))).toBe(b.key);
    // A stamp no binding holds: bound beside, whatever moveFrom names.
    expect(await store.aliasSlices([{ ...alias(d.key, fileStamp(4)), moveFrom: a.key }])).toEqual([true]);
    expect(keysOf(store)).toHaveLength(3);
    await store.close();
  });
});

describe('format gate', () => {
  it('a cache with one binding per slice keeps manifest 2 / journal 1; the first second binding makes it 3 / 2', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    await store.aliasSlices([alias(a.key, fileStamp(1))]);
    expect(await manifestFormat(root)).toBe(2);
    expect(await journalVersion(root, store.generation)).toBe(1);
    await store.compact();
    expect(await manifestFormat(root)).toBe(2);
    expect(await journalVersion(root, store.generation)).toBe(1);
    const before = store.generation;
    await store.aliasSlices([alias(b.key, fileStamp(2))]);
    // The commit was a compaction: a format-3 manifest, a version-2 journal after it.
    expect(store.generation).toBe(before + 1);
    expect(await manifestFormat(root)).toBe(3);
    expect(await journalVersion(root, store.generation)).toBe(2);
    // Unbinding the second binding again: the next manifest is format 2 again, readable by 0.55.0.
    expect(await store.unbindSlices([{ ...SLICE, key: b.key }])).toBe(1);
    expect(await manifestFormat(root)).toBe(2);
    expect(await journalVersion(root, store.generation)).toBe(1);
    await store.close();
  });

  it('0.55.0 refuses what this release writes with a second binding: manifest format other than 2, journal version 2 (UNSUPPORTED_FORMAT)', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2))]);
    await store.close();
    // 0.55.0's checks (git show 4367486:packages/store/src/{manifest,journal}-format.ts): format !== 2
    // and version 2 (= its MAX_NEWER_JOURNAL_VERSION, 1 + 1) are UNSUPPORTED_FORMAT, before any entry or record.
    expect(await manifestFormat(root)).not.toBe(2);
    const generation = (JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { generation: number }).generation;
    expect(await journalVersion(root, generation)).toBe(2);
  });

  it('a format-2 manifest listing one slice under two entries is still MANIFEST_INVALID entry-invalid; format 3 reads it', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2))]);
    await store.close();
    const text = await readFile(join(root, 'manifest.json'), 'utf8');
    await writeSigned(root, text.replace('{"format":3,', '{"format":2,'));
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('MANIFEST_INVALID');
    expect(error.details?.reason).toBe('entry-invalid');
    expect(error.details?.entryCode).toBe('SLICE_CONFLICT');
  });

  it('a format-3 manifest whose bindings break the rule is damage: one stamp under two entries, a binding without a file stamp', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [a, b] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2))]);
    await store.close();
    const text = await readFile(join(root, 'manifest.json'), 'utf8');
    for (const broken of [text.replace(JSON.stringify(fileStamp(2)), JSON.stringify(fileStamp(1))), text.replace(JSON.stringify(fileStamp(2)), JSON.stringify(OBJECT_STAMP))]) {
      expect(broken).not.toBe(text);
      await writeSigned(root, broken);
      const error = await catchError(() => openCacheStore(root));
      expect(error.code).toBe('MANIFEST_INVALID');
      expect(error.details?.reason).toBe('entry-invalid');
    }
  });

  it('a version-1 journal record adding a second binding is damage (JOURNAL_INVALID invalid-ops); in a version-2 journal it applies', async () => {
    for (const version of [1, 2]) {
      const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
      const [a, b] = tensors as [TestTensor, TestTensor];
      const store = await openCacheStore(root);
      await store.aliasSlices([alias(a.key, fileStamp(1))]);
      await store.compact();
      const generation = store.generation;
      await store.close();
      const path = join(root, `journal.${generation}`);
      const journal = await readFile(path);
      expect(journal.length).toBe(JOURNAL_HEADER_BYTES);
      journal.writeUInt32LE(version, 8);
      const record = encodeJournalRecords([{ kind: 'alias', key: b.key, slice: [SHARD, 0, 480, [fileStamp(2)]] }]);
      await writeFile(path, Buffer.concat([journal, record]));
      const reader = await openCacheStore(root, { compactOnClose: false });
      if (version === 1) {
        expect(reader.journalDamage?.code).toBe('JOURNAL_INVALID');
        expect(reader.journalDamage?.details.reason).toBe('invalid-ops');
        expect(keysOf(reader)).toEqual([a.key]);
      } else {
        expect(reader.journalDamage).toBeUndefined();
        expect(keysOf(reader)).toEqual([b.key, a.key]);
      }
      await reader.close();
    }
  });
});

describe('MAX_SLICE_BINDINGS', () => {
  it('binding one more drops the least recent binding, says so, and dropUnboundEntries then drops its entry', async () => {
    const count = MAX_SLICE_BINDINGS + 1;
    const { root, tensors } = await makeUnboundCache(count, FIRST_SEED);
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    // Bound out of order: recency is the file stamp's ctime, not the order of the calls.
    const order = [...tensors.keys()].slice(0, MAX_SLICE_BINDINGS).reverse();
    for (const i of order) await store.aliasSlices([alias(tensors[i]!.key, fileStamp(i + 1))]);
    expect(keysOf(store)).toEqual(order.map((i) => tensors[i]!.key));
    const dropped: [SliceKeyTuple, string][] = [];
    const last = tensors[count - 1]!;
    await store.aliasSlices([alias(last.key, fileStamp(count))], { onBindingDropped: (slice, key) => dropped.push([slice, key]) });
    // The oldest ctime: revision 1, bound last of the eight.
    expect(dropped).toEqual([[[SHARD, 0, 480], tensors[0]!.key]]);
    expect(keysOf(store)).toHaveLength(MAX_SLICE_BINDINGS);
    expect(keysOf(store)[0]).toBe(last.key);
    expect(keysOf(store)).not.toContain(tensors[0]!.key);
    expect(store.getEntry(tensors[0]!.key)?.sliceKeys).toEqual([]);
    await store.close();
    // Replayed from the journal alike.
    const again = await openCacheStore(root);
    expect(keysOf(again)).not.toContain(tensors[0]!.key);
    expect(keysOf(again)).toHaveLength(MAX_SLICE_BINDINGS);
    const report = await again.dropUnboundEntries();
    expect(report.entries.map((e) => e.key)).toEqual([tensors[0]!.key]);
    await again.close();
  });
});

describe('the option and what callers are told', () => {
  it('sliceBindingsPerFile must be a boolean, onBindingDropped a function (INVALID_ARGUMENT)', async () => {
    const { root, tensors } = await makeUnboundCache(1, FIRST_SEED);
    expect((await catchError(() => openCacheStore(root, { sliceBindingsPerFile: 'yes' as unknown as boolean }))).code).toBe('INVALID_ARGUMENT');
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    expect((await catchError(() => store.aliasSlices([alias(tensors[0]!.key, fileStamp(1))], { onBindingDropped: 1 as unknown as () => void }))).code).toBe('INVALID_ARGUMENT');
    await store.close();
  });

  it('with no second binding, a handle with the option writes the same manifest and journal bytes as one without', async () => {
    const written: Buffer[][] = [];
    for (const sliceBindingsPerFile of [false, true]) {
      const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
      const store = await openCacheStore(root, { sliceBindingsPerFile, compactOnClose: false });
      await store.aliasSlices([alias(tensors[0]!.key, fileStamp(1))]);
      await store.aliasSlices([{ key: tensors[1]!.key, shardName: 'other.safetensors', offsetBytes: 0, sizeBytes: 480, stamp: fileStamp(2) }]);
      const journal = await readFile(join(root, `journal.${store.generation}`));
      await store.compact();
      await store.close();
      written.push([journal, await readFile(join(root, 'manifest.json'))]);
    }
    expect(written[1]![0]!.equals(written[0]![0]!)).toBe(true);
    expect(written[1]![1]!.equals(written[0]![1]!)).toBe(true);
    expect(written[0]![0]!.readUInt32LE(8)).toBe(1);
  });

  it('addEntries past MAX_SLICE_BINDINGS reports the binding it dropped (AddEntryResult.droppedBindings)', async () => {
    const root = await makeTempDir();
    const tensors = Array.from({ length: MAX_SLICE_BINDINGS + 1 }, (_, i) => makeTensor([40, 6], 700 + i));
    const store = await openCacheStore(root, { create: true, sliceBindingsPerFile: true });
    for (const [i, t] of tensors.entries()) {
      const [result] = await store.addEntries([toInput(t, `t${i}`, [[SHARD, 0, 480, [fileStamp(i + 1)]]])]);
      expect(result!.droppedBindings).toEqual(i < MAX_SLICE_BINDINGS ? undefined : [{ slice: [SHARD, 0, 480], key: tensors[0]!.key }]);
    }
    expect(keysOf(store)).toHaveLength(MAX_SLICE_BINDINGS);
    await store.close();
  });

  it('recoverDamagedJournal keeps the second bindings of the records it salvages (a version-2 journal)', async () => {
    const { root, tensors } = await makeUnboundCache(4, FIRST_SEED);
    const [a, b, c, d] = tensors as [TestTensor, TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2))]);
    await store.aliasSlices([alias(c.key, fileStamp(3))]);
    await store.aliasSlices([alias(d.key, fileStamp(4))]);
    const generation = store.generation;
    await store.close();
    const path = join(root, `journal.${generation}`);
    const bytes = await readFile(path);
    expect(bytes.readUInt32LE(8)).toBe(2);
    bytes[JOURNAL_HEADER_BYTES + 12 + 3]! ^= 0x40; // the first record's body: its CRC fails, the second record is intact
    await writeFile(path, bytes);
    const damaged = await openCacheStore(root, { compactOnClose: false });
    expect(damaged.journalDamage?.code).toBe('JOURNAL_INVALID');
    const recovery = await damaged.recoverDamagedJournal!();
    expect(recovery?.salvagedRecords).toBe(1);
    expect(recovery?.droppedOps).toBe(0);
    expect(keysOf(damaged)).toEqual([d.key, b.key, a.key]);
    await damaged.close();
    expect(await manifestFormat(root)).toBe(3);
  });
});

describe('unbindSlices', () => {
  it('with a key removes that binding only; without, every binding of the slice', async () => {
    const { root, tensors } = await makeUnboundCache(3, FIRST_SEED);
    const [a, b, c] = tensors as [TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    await store.aliasSlices([alias(a.key, fileStamp(1)), alias(b.key, fileStamp(2)), alias(c.key, fileStamp(3))]);
    expect(await store.unbindSlices([{ ...SLICE, key: b.key }])).toBe(1);
    expect(keysOf(store)).toEqual([c.key, a.key]);
    expect(await store.unbindSlices([SLICE])).toBe(2);
    expect(keysOf(store)).toEqual([]);
    await store.close();
    const again = await openCacheStore(root);
    expect(keysOf(again)).toEqual([]);
    await again.close();
  });
});

/** Writes manifest text with its checksum made right (body_crc32 over the body without it). */
async function writeSigned(root: string, text: string): Promise<void> {
  const { crc32 } = await import('node:zlib');
  const body = text.replace(/,"body_crc32":"[0-9a-f]{8}"}\n$/, '}');
  const crc = (crc32(Buffer.from(body)) >>> 0).toString(16).padStart(8, '0');
  await writeFile(join(root, 'manifest.json'), `${body.slice(0, -1)},"body_crc32":"${crc}"}\n`);
}
