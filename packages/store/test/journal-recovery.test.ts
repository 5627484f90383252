// A damaged journal (its header, or a record with intact ones after it) used to leave a cache that
// no tool could bring back: a damaged header made every open fail, and every writer, gc and
// `build --repair` refused a damaged record. Readers now open with what they can trust, and
// recoverDamagedJournal moves the cache to a new generation from everything readable (the
// records before the damage and every intact one after it), keeping the damaged file.
import { readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { JOURNAL_HEADER_BYTES } from '../src/journal-format.js';
import { MAX_NEWER_JOURNAL_VERSION } from '../src/limits.js';
import { openCacheStore } from '../src/index.js';
import { catchError, makeCache, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

/** A cache whose manifest holds one entry and whose journal.2 holds three more, one record each. */
async function cacheWithJournal() {
  const { root, tensors } = await makeCache();
  const added = [makeTensor([16, 4], 9341), makeTensor([12, 8], 9342), makeTensor([20, 3], 9343)];
  const writer = await openCacheStore(root, { compactOnClose: false });
  for (const [i, t] of added.entries()) await writer.addEntry(toInput(t, `later.${i}`));
  await writer.close();
  return { root, manifestEntry: tensors[0]!, added, journalPath: join(root, 'journal.2') };
}

const headerDamage: [string, (bytes: Buffer) => Buffer][] = [
  ['a flipped magic byte', (b) => Object.assign(Buffer.from(b), { [0]: b[0]! ^ 0x20 })],
  ['another generation', (b) => {
    const c = Buffer.from(b);
    c.writeUInt32LE(7, 12);
    return c;
  }],
  // (1 -> 3 reads as a newer release's since version 2 came: FILE-BINDINGS.md)
  ['a flipped bit in the version field (1 -> 5: above the one newer version a release could write)', (b) => {
    const c = Buffer.from(b);
    c[8]! ^= 0x04;
    return c;
  }],
  ['a flipped bit in the version field (1 -> 513: above any version a release could write)', (b) => {
    const c = Buffer.from(b);
    c[9]! ^= 0x02;
    return c;
  }],
  ['a zeroed version field (older than any journal written)', (b) => {
    const c = Buffer.from(b);
    c.writeUInt32LE(0, 8);
    return c;
  }],
  ['an empty file', () => Buffer.alloc(0)],
  ['a file shorter than the header', (b) => b.subarray(0, 10)],
];

it.each(headerDamage)('a journal header with %s: the cache opens with its manifest, writers refuse, recoverDamagedJournal brings it back', async (_, damage) => {
  const { root, manifestEntry, added, journalPath } = await cacheWithJournal();
  const damaged = damage(await readFile(journalPath));
  await writeFile(journalPath, damaged);

  const store = await openCacheStore(root, { compactOnClose: false });
  const other = await openCacheStore(root, { compactOnClose: false });
  try {
    expect(store.getEntry(manifestEntry.key)).toBeDefined();
    for (const t of added) expect(store.getEntry(t.key)).toBeUndefined();
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.problems[0]).toMatchObject({ code: 'JOURNAL_INVALID', message: expect.stringMatching(/header is damaged/) });
    // What a writer with nothing to write checks (splitzip build): the same damage, on every handle.
    expect(store.journalDamage).toMatchObject({ code: 'JOURNAL_INVALID', message: report.problems[0]!.message });
    expect(other.journalDamage?.code).toBe('JOURNAL_INVALID');
    expect((await catchError(() => store.addEntry(toInput(makeTensor([4, 4], 9344), 'new')))).code).toBe('JOURNAL_INVALID');
    expect((await catchError(() => store.gc({ minAgeMs: 0 }))).code).toBe('JOURNAL_INVALID');
    // Refused writes changed nothing.
    expect(Buffer.from(await readFile(journalPath)).equals(damaged)).toBe(true);

    const recovery = await store.recoverDamagedJournal!();
    expect(recovery!.keptAs).toMatch(/journal\.2\.damaged-\d+$/);
    // The records past the header are this cache's commits: every intact one is kept.
    const intactRecords = damaged.length > JOURNAL_HEADER_BYTES ? 3 : 0;
    expect(recovery).toMatchObject({ generation: 2, damagedFromOffsetBytes: 0, journal: journalPath, salvagedRecords: intactRecords, droppedOps: 0 });
    for (const t of added) expect(store.getEntry(t.key) !== undefined).toBe(intactRecords === 3);
    expect(store.journalDamage).toBeUndefined();
    // The damaged bytes are kept, unread, and gc never removes them.
    expect(Buffer.from(await readFile(recovery!.keptAs!)).equals(damaged)).toBe(true);
    expect((await store.verify({ decode: true })).ok).toBe(true);
    const fresh = makeTensor([4, 4], 9345);
    await store.addEntry(toInput(fresh, 'after'));
    expect(await store.recoverDamagedJournal!()).toBeNull();
    // Another handle follows the new generation.
    await other.refresh();
    expect(other.getEntry(fresh.key)).toBeDefined();
    expect(other.journalDamage).toBeUndefined();
    const gc = await store.gc({ minAgeMs: 0 });
    expect(gc.unknownFiles.some((name) => name.includes('journal.2.damaged-'))).toBe(true);
    expect((await readdir(root)).some((name) => name.startsWith('journal.2.damaged-'))).toBe(true);
    expect((await store.verify({ decode: true })).ok).toBe(true);
  } finally {
    await other.close();
    await store.close();
  }
});

it('a damaged record with intact ones after it: recovery keeps the records before it and every intact one after it', async () => {
  const { root, manifestEntry, added, journalPath } = await cacheWithJournal();
  const intact = await readFile(journalPath);
  // The second record's body: find it after the first record (12-byte record header + body).
  const firstLength = intact.readUInt32LE(JOURNAL_HEADER_BYTES + 4);
  const secondAt = JOURNAL_HEADER_BYTES + 12 + firstLength;
  const damaged = Buffer.from(intact);
  damaged[secondAt + 12 + 20]! ^= 0x01;
  await writeFile(journalPath, damaged);

  const store = await openCacheStore(root, { compactOnClose: false });
  try {
    expect(store.getEntry(added[0]!.key)).toBeDefined();
    expect(store.getEntry(added[1]!.key)).toBeUndefined();
    const recovery = await store.recoverDamagedJournal!();
    expect(recovery).toMatchObject({ generation: 2, damagedFromOffsetBytes: secondAt, salvagedRecords: 1, droppedRecords: 1, droppedOps: 0 });
    expect(store.getEntry(manifestEntry.key)).toBeDefined();
    expect(store.getEntry(added[0]!.key)).toBeDefined();
    expect(store.getEntry(added[1]!.key)).toBeUndefined();
    expect(store.getEntry(added[2]!.key)).toBeDefined();
    expect((await store.verify({ decode: true })).ok).toBe(true);
  } finally {
    await store.close();
  }
  // The new generation holds what was readable, for any later open.
  const reopened = await openCacheStore(root);
  try {
    expect(reopened.getEntry(added[0]!.key)).toBeDefined();
    expect(reopened.getEntry(added[1]!.key)).toBeUndefined();
    expect(reopened.getEntry(added[2]!.key)).toBeDefined();
    expect((await reopened.verify()).ok).toBe(true);
  } finally {
    await reopened.close();
  }
});

it('an intact journal: recoverDamagedJournal changes nothing', async () => {
  const { root, added, journalPath } = await cacheWithJournal();
  const before = await readFile(journalPath);
  const store = await openCacheStore(root, { compactOnClose: false });
  try {
    expect(await store.recoverDamagedJournal!()).toBeNull();
    for (const t of added) expect(store.getEntry(t.key)).toBeDefined();
  } finally {
    await store.close();
  }
  expect(Buffer.from(await readFile(journalPath)).equals(before)).toBe(true);
});

it('a journal of a newer format still fails to open (UNSUPPORTED_FORMAT, not damage), naming the way out if no newer release wrote it', async () => {
  const { root, journalPath } = await cacheWithJournal();
  const bytes = Buffer.from(await readFile(journalPath));
  bytes.writeUInt32LE(MAX_NEWER_JOURNAL_VERSION, 8);
  await writeFile(journalPath, bytes);
  const error = await catchError(() => openCacheStore(root));
  expect(error.code).toBe('UNSUPPORTED_FORMAT');
  expect(error.message).toMatch(/written by a newer release \(if none wrote this cache, the header is damaged: move the journal aside/);
});

it('a writer that opened before the damage keeps committing: recovery keeps those acknowledged commits too', async () => {
  const { root, added, journalPath } = await cacheWithJournal();
  const early = await openCacheStore(root, { compactOnClose: false });
  try {
    const bytes = await readFile(journalPath);
    bytes[1]! ^= 0x01; // the header's magic
    await writeFile(journalPath, bytes);
    // It read the journal before the damage and appends after its last record, as before.
    const late = makeTensor([6, 6], 9346);
    expect((await early.addEntry(toInput(late, 'late'))).added).toBe(true);
    const other = await openCacheStore(root, { compactOnClose: false });
    try {
      expect(other.getEntry(late.key)).toBeUndefined();
      const recovery = await other.recoverDamagedJournal!();
      expect(recovery).toMatchObject({ salvagedRecords: 4, droppedRecords: 0 });
      for (const t of [...added, late]) expect(other.getEntry(t.key)).toBeDefined();
      expect((await other.verify({ decode: true })).ok).toBe(true);
      const gc = await other.gc({ minAgeMs: 0 });
      expect(gc.orphanBlobs).toEqual([]);
    } finally {
      await other.close();
    }
    await early.refresh();
    expect(early.getEntry(late.key)).toBeDefined();
  } finally {
    await early.close();
  }
});

// The last record of a journal, whole but failing its CRC: a crash leaves an append torn only as
// zeros from a sector boundary (what never reached the disk), so anything else is damage at rest.
// It was cut as a torn tail: its acknowledged commits vanished without a word (verify said ok)
// and gc removed their blobs.
describe('a damaged last record', () => {
  /** Offset of the last record of `bytes` (a journal whose records all hold). */
  function lastRecordAt(bytes: Buffer): number {
    let at = JOURNAL_HEADER_BYTES;
    let last = at;
    while (at < bytes.length) {
      last = at;
      at += 12 + bytes.readUInt32LE(at + 4);
    }
    return last;
  }

  it('a flipped bit in it: readers keep what comes before, writers and gc refuse, recovery sets it aside', async () => {
    const { root, manifestEntry, added, journalPath } = await cacheWithJournal();
    const damaged = Buffer.from(await readFile(journalPath));
    const lastAt = lastRecordAt(damaged);
    damaged[damaged.length - 10]! ^= 0x04;
    await writeFile(journalPath, damaged);

    const store = await openCacheStore(root, { compactOnClose: false });
    try {
      expect(store.getEntry(manifestEntry.key)).toBeDefined();
      expect(store.getEntry(added[1]!.key)).toBeDefined();
      expect(store.getEntry(added[2]!.key)).toBeUndefined();
      const report = await store.verify();
      expect(report.ok).toBe(false);
      expect(report.problems[0]).toMatchObject({ code: 'JOURNAL_INVALID', message: expect.stringMatching(/it is the last thing in the file, whole/) });
      expect((await catchError(() => store.addEntry(toInput(makeTensor([4, 4], 9351), 'new')))).code).toBe('JOURNAL_INVALID');
      expect((await catchError(() => store.gc({ minAgeMs: 0 }))).code).toBe('JOURNAL_INVALID');
      // Nothing was cut.
      expect(Buffer.from(await readFile(journalPath)).equals(damaged)).toBe(true);
      const recovery = await store.recoverDamagedJournal!();
      expect(recovery).toMatchObject({ damagedFromOffsetBytes: lastAt, salvagedRecords: 0, droppedRecords: 1 });
      expect(Buffer.from(await readFile(recovery!.keptAs!)).equals(damaged)).toBe(true);
      expect((await store.verify({ decode: true })).ok).toBe(true);
      await store.addEntry(toInput(added[2]!, 'again'));
    } finally {
      await store.close();
    }
  });

  it('a flipped bit in its length field that makes it look cut short: damage too (its CRC holds over the bytes there)', async () => {
    const { root, added, journalPath } = await cacheWithJournal();
    const damaged = Buffer.from(await readFile(journalPath));
    const lastAt = lastRecordAt(damaged);
    damaged[lastAt + 5]! ^= 0x04; // the body length grows by 1,024: past the end of the file
    await writeFile(journalPath, damaged);
    const store = await openCacheStore(root, { compactOnClose: false });
    try {
      expect(store.getEntry(added[2]!.key)).toBeUndefined();
      expect((await store.verify()).problems[0]).toMatchObject({ code: 'JOURNAL_INVALID' });
      expect((await catchError(() => store.addEntry(toInput(makeTensor([4, 4], 9354), 'new')))).code).toBe('JOURNAL_INVALID');
      expect(Buffer.from(await readFile(journalPath)).equals(damaged)).toBe(true);
    } finally {
      await store.close();
    }
  });

  const tornShapes: [string, (bytes: Buffer, lastAt: number) => Buffer][] = [
    ['all zeros (the size reached the disk, no byte of the record)', (b, lastAt) => Buffer.concat([b.subarray(0, lastAt), Buffer.alloc(b.length - lastAt)])],
    ['zeros from a sector boundary inside it to its end', (b, lastAt) => {
      const c = Buffer.from(b);
      const boundary = Math.ceil((lastAt + 13) / 512) * 512;
      c.fill(0, boundary);
      return c;
    }],
    // Sectors persist in any order (XFS completes a new block's write, and the file's size, before
    // the old last block's): the record's share of its first sector reads as the old zeros.
    ['zeros over its share of its first sector, the rest written', (b, lastAt) => {
      const c = Buffer.from(b);
      let boundary = Math.ceil((lastAt + 1) / 512) * 512;
      if (boundary - lastAt < 16) boundary += 512;
      c.fill(0, lastAt, boundary);
      return c;
    }],
    ['zeros over one whole sector inside it', (b, lastAt) => {
      const c = Buffer.from(b);
      const boundary = Math.ceil((lastAt + 13) / 512) * 512;
      c.fill(0, boundary, boundary + 512);
      return c;
    }],
    ['cut short (a short write: the file ends inside it)', (b) => b.subarray(0, b.length - 100)],
  ];

  it.each(tornShapes)('a torn write, %s: cut under the lock as before, the earlier commits kept', async (_, tear) => {
    const { root, manifestEntry, added, journalPath } = await cacheWithJournal();
    // A last record longer than a sector, so that a boundary falls inside it.
    const writer = await openCacheStore(root, { compactOnClose: false });
    const big = makeTensor([8, 8], 9352);
    const slices: [string, number, number][] = Array.from({ length: 40 }, (_, i) => [`a-rather-long-shard-name-${i}.safetensors`, 128 * i, 128]);
    await writer.addEntry(toInput(big, 'big', slices));
    await writer.close();
    const bytes = Buffer.from(await readFile(journalPath));
    const lastAt = lastRecordAt(bytes);
    expect(bytes.length - lastAt).toBeGreaterThan(1024);
    const torn = tear(bytes, lastAt);
    await writeFile(journalPath, torn);

    const store = await openCacheStore(root, { compactOnClose: false });
    try {
      expect(store.getEntry(manifestEntry.key)).toBeDefined();
      for (const t of added) expect(store.getEntry(t.key)).toBeDefined();
      expect(store.getEntry(big.key)).toBeUndefined();
      expect((await store.verify()).ok).toBe(true);
      await store.addEntry(toInput(makeTensor([4, 4], 9353), 'after'));
      expect((await store.verify({ decode: true })).ok).toBe(true);
    } finally {
      await store.close();
    }
  });
});

// A journal removed (by hand, a cleanup script, a lost file): every journal exists before a
// manifest names it, so its absence is a loss, not an empty journal. It read as empty: its
// commits vanished without a word, a writer made a fresh one, and gc removed their blobs.
it('a missing journal: the cache opens with its manifest, writers and gc refuse, recovery moves it to a new generation', async () => {
  const { root, manifestEntry, added, journalPath } = await cacheWithJournal();
  await rm(journalPath);
  const store = await openCacheStore(root, { compactOnClose: false });
  try {
    expect(store.getEntry(manifestEntry.key)).toBeDefined();
    for (const t of added) expect(store.getEntry(t.key)).toBeUndefined();
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.problems[0]).toMatchObject({ code: 'JOURNAL_INVALID', message: expect.stringMatching(/journal\.2, which the manifest names, is missing/) });
    expect((await catchError(() => store.addEntry(toInput(makeTensor([4, 4], 9361), 'new')))).code).toBe('JOURNAL_INVALID');
    expect((await catchError(() => store.gc({ minAgeMs: 0 }))).code).toBe('JOURNAL_INVALID');
    // The refused writer did not make a fresh journal in its place.
    expect((await readdir(root)).includes('journal.2')).toBe(false);
    const recovery = await store.recoverDamagedJournal!();
    expect(recovery).toMatchObject({ generation: 2, keptAs: null, salvagedRecords: 0, droppedRecords: 0 });
    expect((await store.verify({ decode: true })).ok).toBe(true);
    await store.addEntry(toInput(added[0]!, 'again'));
    expect(await store.recoverDamagedJournal!()).toBeNull();
  } finally {
    await store.close();
  }
  const reopened = await openCacheStore(root);
  try {
    expect(reopened.getEntry(added[0]!.key)).toBeDefined();
    expect((await reopened.verify()).ok).toBe(true);
  } finally {
    await reopened.close();
  }
});
