// A damaged manifest.json (its checksum fails, or its text no longer parses) made every open fail,
// and no tool brought the cache back: the way out was to remove it and build every model again.
// recoverDamagedManifest keeps what can be trusted: every entry whose own text still reads and whose
// blob decodes to its content key (without bindings: the damage cannot be located), and the intact
// records of the journal; the damaged bytes are kept aside.
import { cp, link, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FsCacheStore } from '../src/cache-store.js';
import { StoreError } from '../src/errors.js';
import { FsBackend } from '../src/fs-backend.js';
import { findNewerJournal } from '../src/find-newer-journal.js';
import { JOURNAL_HEADER_BYTES } from '../src/journal-format.js';
import { MIN_ENTRY_TEXT_BYTES } from '../src/limits.js';
import { openCacheStore, recoverDamagedManifest } from '../src/index.js';
import { recoverManifest } from '../src/recover-damaged-manifest.js';
import { salvageManifest } from '../src/salvage-manifest.js';
import { catchError, makeCache, makeCacheWithJournal, makeRestoredOlderCopy, makeTempDir, makeTensor, removeTempDirs, toInput, trackTempDir } from './helpers.js';

afterEach(removeTempDirs);

async function damageManifest(root: string, edit: (text: string) => string): Promise<Buffer> {
  const path = join(root, 'manifest.json');
  const text = (await readFile(path)).toString('utf8');
  const damaged = Buffer.from(edit(text), 'utf8');
  expect(damaged.equals(Buffer.from(text, 'utf8'))).toBe(false);
  await writeFile(path, damaged);
  return damaged;
}

/** The text of entry `key` in the manifest, and where it starts. */
function entryText(text: string, key: string): { at: number; body: string } {
  const at = text.indexOf(`"${key}":{`);
  expect(at).toBeGreaterThan(0);
  const end = text.indexOf('},"', text.indexOf('"blob_checksum"', at));
  return { at, body: text.slice(at, end + 1) };
}

/** Asserts who the slice the binding tests use (model.safetensors @1000, 240 B) is bound to in the recovered cache. */
async function expectSliceOwner(root: string, key: string | undefined): Promise<void> {
  const store = await openCacheStore(root);
  try {
    expect(store.lookupBySlice('model.safetensors', 1000, 240)?.key).toBe(key);
  } finally {
    await store.close();
  }
}

/** A kept journal's name: one whose bindings were judged superseded. */
const unsalvaged = (generation: number): unknown => expect.stringMatching(new RegExp(`journal\\.${generation}\\.unsalvaged-\\d+$`));

describe('recoverDamagedManifest', () => {
  it('a changed digit in a binding (the text still parses): every entry kept, every manifest binding dropped, the journal records kept', async () => {
    const { root, inManifest, inJournal } = await makeCacheWithJournal();
    // shard-2's offset 0 becomes 1: with the checksum gone, that binding would name another span.
    const damaged = await damageManifest(root, (text) => text.replace('["shard-2",0,240', '["shard-2",1,240'));
    expect((await catchError(() => openCacheStore(root))).code).toBe('MANIFEST_INVALID');

    const progress: unknown[] = [];
    const recovery = await recoverDamagedManifest(root, { onProgress: (p) => progress.push(p) });
    // Before the first check and after each: entries and their blob bytes.
    const blobBytes = inManifest.map((t) => t.payload.length);
    const total = blobBytes.reduce((a, b) => a + b, 0);
    expect(progress).toHaveLength(5);
    expect(progress[0]).toEqual({ done: 0, total: 4, doneBytes: 0, totalBytes: total });
    expect(progress[4]).toEqual({ done: 4, total: 4, doneBytes: total, totalBytes: total });
    expect(recovery).toMatchObject({
      journalGeneration: 2,
      generation: 3,
      salvagedEntries: 4,
      droppedEntries: [],
      droppedBindings: 4,
      salvagedRecords: 2,
      droppedRecords: 0,
      droppedOps: 0,
      defaultedSettings: [],
      reason: expect.stringMatching(/^manifest checksum mismatch/),
    });
    expect(recovery!.keptAs).toMatch(/manifest\.json\.damaged-\d+$/);
    expect((await readFile(recovery!.keptAs)).equals(damaged)).toBe(true);
    const names = await readdir(root);
    expect(names).toContain('journal.3');
    expect(names).not.toContain('journal.2');

    const store = await openCacheStore(root);
    try {
      for (const t of [...inManifest, ...inJournal]) expect(store.getEntry(t.key)).toBeDefined();
      for (let i = 0; i < inManifest.length; i++) expect(store.lookupBySlice(`shard-${i}`, 0, 240)).toBeUndefined();
      // Bindings from the journal's records are checksummed: kept.
      expect(store.lookupBySlice('later-shard', 0, inJournal[0]!.bytes.length)?.key).toBe(inJournal[0]!.key);
      expect((await store.verify({ decode: true })).ok).toBe(true);
      // A writer binds again and the cache goes on.
      expect(await store.aliasSlice(inManifest[2]!.key, 'shard-2', 0, 240)).toBe(true);
      const gc = await store.gc({ minAgeMs: 0 });
      expect(gc.unknownFiles.some((name) => name.includes('manifest.json.damaged-'))).toBe(true);
      expect(gc.orphanBlobs).toEqual([]);
    } finally {
      await store.close();
    }
    expect(await recoverDamagedManifest(root)).toBeNull();
  });

  it('text that no longer parses: only the damaged entry is lost, the rest read entry by entry', async () => {
    const { root, inManifest, inJournal } = await makeCacheWithJournal();
    const victim = inManifest[1]!.key;
    await damageManifest(root, (text) => {
      const { at, body } = entryText(text, victim);
      // A quote in the middle of its codebook becomes a NUL: this entry's braces no longer balance as JSON.
      const inside = body.indexOf('"exponents"') + 3;
      return text.slice(0, at + inside) + '\u0000' + text.slice(at + inside + 1);
    });
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ salvagedEntries: 3, droppedEntries: [victim], droppedBindings: 3, salvagedRecords: 2 });
    const store = await openCacheStore(root);
    try {
      for (const t of [...inManifest, ...inJournal]) expect(store.getEntry(t.key) !== undefined).toBe(t.key !== victim);
      expect((await store.verify({ decode: true })).ok).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('a field changed to another valid value (the original sha256, a codebook exponent) is caught by decoding the blob: that entry is dropped', async () => {
    const { root, tensors: inManifest } = await makeCache(3);
    const [a, b] = [inManifest[0]!, inManifest[1]!];
    await damageManifest(root, (text) => {
      const flipHex = (c: string): string => (c === '0' ? '1' : '0');
      const shaAt = text.indexOf(`"sha256":"${a.sha256}"`) + '"sha256":"'.length;
      let out = text.slice(0, shaAt) + flipHex(text[shaAt]!) + text.slice(shaAt + 1);
      const { at, body } = entryText(out, b.key);
      const exp = at + body.indexOf('"exponents":[') + '"exponents":['.length;
      const close = out.indexOf(']', exp);
      const first = out.slice(exp, close).split(',');
      // The first exponent becomes one no value of this tensor has: still a valid codebook.
      const unused = [...Array(256).keys()].find((e) => !first.includes(String(e)))!;
      out = out.slice(0, exp) + [String(unused), ...first.slice(1)].join(',') + out.slice(close);
      return out;
    });
    const recovery = await recoverDamagedManifest(root);
    expect(recovery!.salvagedEntries).toBe(1);
    expect([...recovery!.droppedEntries].sort()).toEqual([a.key, b.key].sort());
    const store = await openCacheStore(root);
    try {
      expect(store.getEntry(inManifest[2]!.key)).toBeDefined();
      expect(store.getEntry(a.key)).toBeUndefined();
      expect(store.getEntry(b.key)).toBeUndefined();
      expect((await store.verify({ decode: true })).ok).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('an entry whose blob is missing or damaged is dropped; its blob file is left for gc', async () => {
    const { root, tensors: inManifest } = await makeCache(3);
    await rm(join(root, 'blobs', `${inManifest[0]!.key}.bin`));
    const blob = join(root, 'blobs', `${inManifest[1]!.key}.bin`);
    const bytes = await readFile(blob);
    bytes[bytes.length - 1]! ^= 0x40;
    await writeFile(blob, bytes);
    await damageManifest(root, (text) => text.replace('"layer.2"', '"layer.X"'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery!.salvagedEntries).toBe(1);
    expect(recovery!.droppedEntries.sort()).toEqual([inManifest[0]!.key, inManifest[1]!.key].sort());
    const store = await openCacheStore(root);
    try {
      // The qualname is the one field nothing checks: kept as it reads.
      expect(store.getEntry(inManifest[2]!.key)?.qualname).toBe('layer.X');
      expect((await store.verify({ decode: true })).ok).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('an unreadable generation: the one journal of the cache is salvaged; an unreadable chunk_size becomes the default, reported', async () => {
    const root = await makeTempDir();
    const creator = await openCacheStore(root, { create: true, chunkSize: 256 });
    const t = makeTensor([24, 5], 4242);
    await creator.close();
    const writer = await openCacheStore(root, { compactOnClose: false });
    await writer.addEntry(toInput(t, 'only', [['s', 0, t.bytes.length]]));
    await writer.close();
    await damageManifest(root, (text) => text.replace('"chunk_size":256', '"chunk_size":255').replace('"generation":1', '"generation":"1'));
    expect(salvageManifest(await readFile(join(root, 'manifest.json')))).toMatchObject({ generation: undefined, chunkSize: undefined, coverageMin: 0.99 });
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: 1, generation: 2, salvagedEntries: 0, salvagedRecords: 1, defaultedSettings: ['chunkSize'] });
    const store = await openCacheStore(root);
    try {
      expect(store.lookupBySlice('s', 0, t.bytes.length)?.key).toBe(t.key);
      expect(store.chunkSize).toBe(1024);
    } finally {
      await store.close();
    }
  });

  it('a generation changed to another number (2 → 3, one bit): the journal is still salvaged, gc removes no blob', async () => {
    const { root, inManifest, inJournal } = await makeCacheWithJournal();
    await damageManifest(root, (text) => text.replace('"generation":2,', '"generation":3,'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: 2, generation: 4, salvagedRecords: 2, keptJournals: [] });
    const store = await openCacheStore(root);
    try {
      for (const t of [...inManifest, ...inJournal]) expect(store.getEntry(t.key)).toBeDefined();
      expect((await store.gc({ minAgeMs: 0 })).orphanBlobs).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('a truncated manifest whose first recovery failed at the manifest write (an empty newer journal left): the rerun still salvages the records', async () => {
    const { root, inJournal } = await makeCacheWithJournal();
    await damageManifest(root, (text) => text.slice(0, text.length - 80));
    const failing = new Proxy(new FsBackend(root), {
      get(target, name, receiver) {
        const value: unknown = Reflect.get(target, name, receiver);
        if (name === 'writeManifest') return () => Promise.reject(Object.assign(new Error('no space left on device (a test fault)'), { code: 'ENOSPC' }));
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    await expect(recoverManifest(failing, { lockTimeoutMs: 5000 })).rejects.toThrow(/no space/);
    expect(await readdir(root)).toContain('journal.3');
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: 2, salvagedRecords: 2, generation: 4 });
    const store = await openCacheStore(root);
    try {
      for (const t of inJournal) expect(store.getEntry(t.key)).toBeDefined();
      // The cut took the last entry's end: only its blob is an orphan.
      expect(recovery!.droppedEntries).toHaveLength(1);
      expect((await store.gc({ minAgeMs: 0 })).orphanBlobs).toEqual([`blobs/${recovery!.droppedEntries[0]}.bin`]);
    } finally {
      await store.close();
    }
  });

  it('a journal with a damaged record beside the damaged manifest: its intact records kept, the file kept as journal.<G>.damaged-<ms>', async () => {
    const { root, inJournal } = await makeCacheWithJournal();
    const journalPath = join(root, 'journal.2');
    const journal = await readFile(journalPath);
    // A byte inside the first record (after the header): its CRC fails, the second record reads.
    journal[JOURNAL_HEADER_BYTES + 40]! ^= 0x10;
    await writeFile(journalPath, journal);
    await damageManifest(root, (text) => text.replace('"layer.0"', '"layer.O"'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: 2, salvagedRecords: 1, droppedRecords: 1 });
    expect(recovery!.keptJournals).toHaveLength(1);
    expect(recovery!.keptJournals[0]).toMatch(/journal\.2\.damaged-\d+$/);
    expect((await readFile(recovery!.keptJournals[0]!)).equals(journal)).toBe(true);
    const store = await openCacheStore(root);
    try {
      expect(store.getEntry(inJournal[0]!.key)).toBeUndefined();
      expect(store.getEntry(inJournal[1]!.key)).toBeDefined();
    } finally {
      await store.close();
    }
  });

  it('an old journal left behind by a failed removal after a compaction is superseded: a binding removed and made again since keeps its newer entry', async () => {
    const { root, tensors } = await makeCache(2);
    const [a, b] = [tensors[0]!, tensors[1]!];
    const writer = await openCacheStore(root, { compactOnClose: false });
    const old = writer.generation;
    await writer.aliasSlice(a.key, 'model.safetensors', 1000, 240, '240:1:1:1');
    const stale = await readFile(join(root, `journal.${old}`));
    await writer.compact();
    // What a crash between the manifest's rename and the old journal's removal leaves.
    await writeFile(join(root, `journal.${old}`), stale);
    expect(await writer.unbindSlices([{ shardName: 'model.safetensors', offsetBytes: 1000, sizeBytes: 240 }])).toBe(1);
    await writer.aliasSlice(b.key, 'model.safetensors', 1000, 240, '240:2:2:2');
    await writer.close();
    await damageManifest(root, (text) => text.replace('["shard-0",0,240', '["shard-0",1,240'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: old + 2, salvagedRecords: 1, droppedOps: 0 });
    // Kept in case the judgement was wrong, never replayed.
    expect(recovery!.keptJournals).toEqual([unsalvaged(old)]);
    await expectSliceOwner(root, b.key);
  });

  it('the journal the manifest names is its own: an old unsealed one a failed removal left beside it is not replayed, even when the named one is empty', async () => {
    const { root, tensors } = await makeCache(2);
    const writer = await openCacheStore(root, { compactOnClose: false });
    const old = writer.generation;
    await writer.aliasSlice(tensors[0]!.key, 'model.safetensors', 1000, 240, '240:1:1:1');
    // Unsealed, as a move to a new generation without a seal leaves it (a hard-linked copy's, a journal recovery's).
    const stale = await readFile(join(root, `journal.${old}`));
    await writer.compact();
    await writeFile(join(root, `journal.${old}`), stale);
    // A prune: a manifest-only generation, its journal empty.
    expect(await writer.unbindSlices([{ shardName: 'model.safetensors', offsetBytes: 1000, sizeBytes: 240 }])).toBe(1);
    await writer.close();
    await damageManifest(root, (text) => text.replace('"layer.1"', '"layer.I"'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: null, salvagedRecords: 0 });
    expect(recovery!.keptJournals).toEqual([unsalvaged(old)]);
    await expectSliceOwner(root, undefined);
  });

  it('a compaction interrupted after its seal (journal sealed, the next one empty) and a generation flipped onto the empty one: the sealed journal\'s entries are still kept, gc removes no blob', async () => {
    const { root, inManifest, inJournal } = await makeCacheWithJournal();
    class FailingManifest extends FsBackend {
      override async writeManifest(): Promise<void> {
        throw new StoreError('IO_ERROR', 'cannot write the manifest (a test fault)');
      }
    }
    // The compaction seals journal.2, makes journal.3 and fails at the manifest: the state a crash there leaves.
    const store = await FsCacheStore.load(new FailingManifest(root), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false });
    expect((await catchError(() => store.compact())).code).toBe('IO_ERROR');
    await store.close();
    expect((await readdir(root)).filter((name) => name.startsWith('journal.')).sort()).toEqual(['journal.2', 'journal.3']);
    // The one digit that makes the two states (interrupted, or finished with journal.2 left) alike.
    await damageManifest(root, (text) => text.replace('"generation":2,', '"generation":3,'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: null, salvagedEntries: 4, journalEntries: 0, otherJournalEntries: 2, droppedEntries: [] });
    const reopened = await openCacheStore(root);
    try {
      for (const t of [...inManifest, ...inJournal]) expect(reopened.getEntry(t.key)).toBeDefined();
      expect((await reopened.gc({ minAgeMs: 0 })).orphanBlobs).toEqual([]);
      expect((await reopened.verify({ decode: true })).ok).toBe(true);
    } finally {
      await reopened.close();
    }
  });

  it('a stray journal file far above every generation (its header not its own) is kept aside and stepped over, not counted', async () => {
    const { root, inJournal } = await makeCacheWithJournal();
    await writeFile(join(root, 'journal.4294967295'), Buffer.from('not a journal of this cache'));
    await damageManifest(root, (text) => text.replace('"layer.0"', '"layer.o"'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: 2, generation: 3, salvagedRecords: 2 });
    expect(recovery!.keptJournals).toEqual([expect.stringMatching(/journal\.4294967295\.damaged-\d+$/)]);
    const store = await openCacheStore(root);
    try {
      for (const t of inJournal) expect(store.getEntry(t.key)).toBeDefined();
    } finally {
      await store.close();
    }
  });

  it('a generation flipped onto an old journal left behind while a newer journal has records: the newer one is replayed (a rebind made since stays)', async () => {
    const { root, tensors } = await makeCache(2);
    const [a, b] = [tensors[0]!, tensors[1]!];
    class FailingRemove extends FsBackend {
      override async removeJournal(): Promise<void> {
        throw new StoreError('IO_ERROR', 'cannot remove the old journal (a test fault)');
      }
    }
    const writer = await FsCacheStore.load(new FailingRemove(root), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false });
    const old = writer.generation;
    await writer.aliasSlices([{ key: a.key, shardName: 'model.safetensors', offsetBytes: 1000, sizeBytes: 240, stamp: '240:1:1:1' }]);
    await writer.compact();
    await writer.aliasSlices([{ key: b.key, shardName: 'model.safetensors', offsetBytes: 1000, sizeBytes: 240, stamp: '240:2:2:2' }], { rebind: true });
    await writer.close();
    await damageManifest(root, (text) => text.replace(`"generation":${old + 1},`, `"generation":${old},`));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: old + 1, salvagedRecords: 1 });
    expect(recovery!.keptJournals).toEqual([unsalvaged(old)]);
    await expectSliceOwner(root, b.key);
  });

  it('the manifest and the journal header both damaged: the journal\'s records are still salvaged (each has its CRC), the journal kept aside', async () => {
    const { root, inManifest, inJournal } = await makeCacheWithJournal();
    const journalPath = join(root, 'journal.2');
    const journal = await readFile(journalPath);
    journal[9]! ^= 0x02; // the version field: 1 -> 513
    await writeFile(journalPath, journal);
    await damageManifest(root, (text) => text.replace('"layer.3"', '"layer.E"'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ journalGeneration: 2, salvagedRecords: 2, journalEntries: 2 });
    expect(recovery!.keptJournals).toEqual([expect.stringMatching(/journal\.2\.damaged-\d+$/)]);
    const store = await openCacheStore(root);
    try {
      for (const t of [...inManifest, ...inJournal]) expect(store.getEntry(t.key)).toBeDefined();
      expect(store.lookupBySlice('later-shard', 0, inJournal[0]!.bytes.length)?.key).toBe(inJournal[0]!.key);
    } finally {
      await store.close();
    }
  });

  it('damage confined to an entry\'s bindings costs the entry nothing (they are dropped anyway)', async () => {
    const { root, tensors } = await makeCache(3);
    await damageManifest(root, (text) => text.replace('["shard-1",0,240', '["shard-1",0,"240"'));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ salvagedEntries: 3, droppedEntries: [], droppedBindings: 3 });
    const store = await openCacheStore(root);
    try {
      for (const t of tensors) expect(store.getEntry(t.key)).toBeDefined();
    } finally {
      await store.close();
    }
  });

  it('an entry the journal added is checked against its blob like the manifest\'s: a damaged one is left out and reported', async () => {
    const { root, inJournal } = await makeCacheWithJournal();
    const blob = join(root, 'blobs', `${inJournal[1]!.key}.bin`);
    const bytes = await readFile(blob);
    bytes[bytes.length - 1]! ^= 0x01;
    await writeFile(blob, bytes);
    await damageManifest(root, (text) => text.replace('"layer.0"', '"layer.Q"'));
    const recovery = await recoverDamagedManifest(root);
    // Counted after the checks: 4 from the manifest + 1 from the journal = the cache's 5.
    expect(recovery).toMatchObject({ salvagedEntries: 4, journalEntries: 1, otherJournalEntries: 0, salvagedRecords: 2, droppedEntries: [inJournal[1]!.key] });
    const store = await openCacheStore(root);
    try {
      expect(store.getEntry(inJournal[0]!.key)).toBeDefined();
      expect(store.getEntry(inJournal[1]!.key)).toBeUndefined();
      expect((await store.verify({ decode: true })).ok).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('one entry given another\'s key by the damage: neither is kept, both reported', async () => {
    const { root, tensors } = await makeCache(3);
    const [a, b] = [tensors[0]!.key, tensors[1]!.key];
    await damageManifest(root, (text) => text.replace(`"${a}":{`, `"${b}":{`));
    const recovery = await recoverDamagedManifest(root);
    expect(recovery!.salvagedEntries).toBe(1);
    expect(recovery!.droppedEntries).toEqual([b]);
    const store = await openCacheStore(root);
    try {
      expect(store.getEntry(a)).toBeUndefined();
      expect(store.getEntry(b)).toBeUndefined();
      expect(store.getEntry(tensors[2]!.key)).toBeDefined();
    } finally {
      await store.close();
    }
  });

  it('salvageManifest on hostile bytes: each scan stops at the next entry start (characters scanned counted: linear), never throws but for more starts than entries could fill', () => {
    // 5,000 starts that never close, each padded to more than MIN_ENTRY_TEXT_BYTES.
    const starts = Array.from({ length: 5_000 }, (_, i) => `"${i.toString(16).padStart(40, '0')}":{"qualname":[${'['.repeat(MIN_ENTRY_TEXT_BYTES)}`).join('');
    const text = `{"format":2,"entries":{${starts}`;
    const stats = { scannedChars: 0 };
    const salvage = salvageManifest(Buffer.from(text), stats);
    // Scanning to the end of the text from each start read ~5,000 times as much (20,000 such took 27 s, under the writer lock).
    expect(stats.scannedChars).toBeGreaterThan(0);
    expect(stats.scannedChars).toBeLessThanOrEqual(text.length);
    expect(salvage.entries).toEqual([]);
    expect(salvage.unreadableEntries).toHaveLength(5_000);
    for (const bytes of [Buffer.alloc(0), Buffer.from([0xff, 0xfe, 0x7b]), Buffer.from('[]'), Buffer.from('{"entries":{"' + 'f'.repeat(40) + '":{"qualname":"\\')]) {
      expect(salvageManifest(bytes).entries).toEqual([]);
    }
    // Empty entries packed closer than any entry of the store's: refused at once (10M of them ran it out of memory).
    const packed = Buffer.from(`{"format":2,"entries":{${Array.from({ length: 20_000 }, (_, i) => `"${i.toString(16).padStart(40, '0')}":{},`).join('')}}}`);
    let error: unknown;
    try {
      salvageManifest(packed);
    } catch (caught) {
      error = caught;
    }
    expect(error).toMatchObject({ code: 'MANIFEST_INVALID', message: expect.stringMatching(/not a manifest the store wrote/) });
  });

  describe('an older copy of the manifest put back beside a newer journal holding commits', () => {
    it('verify says so, gc keeps the newer journal, and recoverDamagedManifest replays it', async () => {
      const { root, inManifest, inJournal, late } = await makeRestoredOlderCopy();
      const store = await openCacheStore(root, { compactOnClose: false });
      try {
        expect(store.getEntry(late.key)).toBeUndefined();
        const report = await store.verify();
        expect(report.ok).toBe(false);
        expect(report.problems[0]).toMatchObject({ code: 'MANIFEST_INVALID', message: expect.stringMatching(/older than .*journal\.3, which holds commits/) });
        // gc would read the newer journal's blobs as orphans: it refuses, removing nothing.
        for (const dryRun of [true, false]) {
          const error = await catchError(() => store.gc({ minAgeMs: 0, dryRun }));
          expect(error).toMatchObject({ code: 'MANIFEST_INVALID', message: expect.stringMatching(/gc refuses: .*older copy put back/) });
        }
        expect(await readdir(root)).toContain('journal.3');
        expect(await readdir(join(root, 'blobs'))).toContain(`${late.key}.bin`);
      } finally {
        await store.close();
      }
      const recovery = await recoverDamagedManifest(root);
      expect(recovery).toMatchObject({ journalGeneration: 3, journalEntries: 1, otherJournalEntries: 2, droppedEntries: [], reason: expect.stringMatching(/an older copy put back/) });
      const recovered = await openCacheStore(root);
      try {
        for (const t of [...inManifest, ...inJournal, late]) expect(recovered.getEntry(t.key)).toBeDefined();
        expect(recovered.lookupBySlice('late-shard', 0, late.bytes.length)?.key).toBe(late.key);
        expect((await recovered.verify({ decode: true })).ok).toBe(true);
      } finally {
        await recovered.close();
      }
    });

    it('a healthy cache read by a caller behind it (a compaction and a commit since it read generation 2) is no older copy: the manifest on disk names the journal', async () => {
      const { root } = await makeCacheWithJournal();
      const writer = await openCacheStore(root, { compactOnClose: false });
      await writer.compact();
      const late = makeTensor([10, 10], 9352);
      await writer.addEntry(toInput(late, 'late'));
      await writer.close();
      expect(await findNewerJournal(new FsBackend(root), 2)).toBeUndefined();
      // The same files with the older manifest put back: found.
      await writeFile(join(root, 'manifest.json'), (await readFile(join(root, 'manifest.json'), 'utf8')).replace('"generation":3', '"generation":2'));
      expect(await findNewerJournal(new FsBackend(root), 2)).toMatchObject({ generation: 3 });
    });

    it('writers refuse to compact over it (close, gc of a hard-linked copy): the newer journal stays in place, the writer\'s commit too, and recovery keeps both', async () => {
      const { root, late, newerJournal } = await makeRestoredOlderCopy();
      const writer = await openCacheStore(root);
      const more = makeTensor([6, 7], 9351);
      await writer.addEntry(toInput(more, 'more'));
      expect(await catchError(() => writer.compact())).toMatchObject({ code: 'MANIFEST_INVALID', message: expect.stringMatching(/writers refuse to compact over it/) });
      // Its close says so too (the commit is durable in the journal; the runtime's close lets this one pass).
      expect((await catchError(() => writer.close())).code).toBe('MANIFEST_INVALID');
      // A snapshot tool's hard link to the journal: gc's writer session moves off a shared journal by
      // a compaction, which ran before gc's own check and let it remove the newer commit's blob.
      await link(join(root, 'journal.2'), `${root}-journal-snapshot`);
      const gcHandle = await openCacheStore(root, { compactOnClose: false });
      try {
        expect((await catchError(() => gcHandle.gc({ minAgeMs: 0 }))).code).toBe('MANIFEST_INVALID');
      } finally {
        await gcHandle.close();
      }
      await rm(`${root}-journal-snapshot`);
      expect((await readFile(join(root, 'journal.3'))).equals(newerJournal)).toBe(true);
      expect(await readdir(join(root, 'blobs'))).toContain(`${late.key}.bin`);
      const recovery = await recoverDamagedManifest(root);
      expect(recovery).toMatchObject({ journalGeneration: 3, journalEntries: 1 });
      const store = await openCacheStore(root);
      try {
        for (const t of [late, more]) expect(store.getEntry(t.key)).toBeDefined();
        expect((await store.verify({ decode: true })).ok).toBe(true);
      } finally {
        await store.close();
      }
    });
  });

  it('an intact manifest: null, nothing written, no lock taken; no manifest, a directory in its place, an s3:// URL: typed errors', async () => {
    const { root } = await makeCache(2);
    const before = (await readdir(root)).sort();
    const manifest = await readFile(join(root, 'manifest.json'));
    expect(await recoverDamagedManifest(root)).toBeNull();
    expect((await readdir(root)).sort()).toEqual(before);
    expect((await readFile(join(root, 'manifest.json'))).equals(manifest)).toBe(true);

    const empty = await makeTempDir();
    expect((await catchError(() => recoverDamagedManifest(empty))).code).toBe('NOT_A_CACHE');
    await mkdir(join(empty, 'manifest.json'));
    const notFile = await catchError(() => recoverDamagedManifest(empty));
    expect(notFile).toMatchObject({ code: 'MANIFEST_INVALID', details: { reason: 'not-a-file' } });
    expect((await catchError(() => recoverDamagedManifest('s3://bucket/cache'))).code).toBe('INVALID_ARGUMENT');
    expect((await catchError(() => recoverDamagedManifest(''))).code).toBe('INVALID_ARGUMENT');
  });

  it('a crash at any step leaves the damaged cache as it was (a rerun recovers it) or the recovered one, opening and verifying', async () => {
    const { root, inManifest, inJournal } = await makeCacheWithJournal();
    await damageManifest(root, (text) => text.replace('["shard-0",0,240', '["shard-0",2,240'));
    const copies: { step: string; path: string }[] = [];
    const crashHere = async (step: string): Promise<void> => {
      const path = `${root}-crash-${copies.length}`;
      trackTempDir(path);
      // The dead writer's lock is recovered by the next writer: left out.
      await cp(root, path, { recursive: true, filter: (source) => !source.endsWith('/lock') });
      copies.push({ step, path });
    };
    const backend = new FsBackend(root);
    const steps = ['keepManifestCopy', 'createJournal', 'writeManifest', 'removeJournal'] as const;
    const wrapped = new Proxy(backend, {
      get(target, name, receiver) {
        const value: unknown = Reflect.get(target, name, receiver);
        if (typeof value !== 'function') return value;
        if (!(steps as readonly (string | symbol)[]).includes(name)) return value.bind(target);
        return async (...args: unknown[]) => {
          await crashHere(`before ${String(name)}`);
          const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          await crashHere(`after ${String(name)}`);
          return result;
        };
      },
    });
    const recovery = await recoverManifest(wrapped, { lockTimeoutMs: 5000 });
    expect(recovery?.salvagedEntries).toBe(4);
    expect(copies.map((c) => c.step)).toEqual(steps.flatMap((s) => [`before ${s}`, `after ${s}`]));
    for (const { step, path } of copies) {
      const committed = step === 'after writeManifest' || step.endsWith('removeJournal');
      if (!committed) {
        expect((await catchError(() => openCacheStore(path))).code, step).toBe('MANIFEST_INVALID');
        expect((await recoverDamagedManifest(path))?.salvagedEntries, step).toBe(4);
      }
      const store = await openCacheStore(path);
      try {
        for (const t of [...inManifest, ...inJournal]) expect(store.getEntry(t.key), step).toBeDefined();
        expect((await store.verify({ decode: true })).ok, step).toBe(true);
      } finally {
        await store.close();
      }
      expect(await recoverDamagedManifest(path), step).toBeNull();
      await rm(path, { recursive: true, force: true });
    }
  });
});
