// A journal record whose CRC holds but whose ops are not valid (fuzz probe, 2026-12-07: an alias of
// a missing entry, an add with an unsafe blob path, an alias of the wrong size, 100,000 stamps,
// deeply nested MessagePack) failed every open with its error, `build --repair` included ("names an
// entry that does not exist", no remedy). Now it is damage at its offset, as a record that fails its
// CRC: readers open with the records before it, writers and gc refuse (JOURNAL_INVALID, reason
// 'invalid-ops'), and recoverDamagedJournal sets the journal aside keeping every record after it.
import { crc32 } from 'node:zlib';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { JOURNAL_HEADER_BYTES } from '../src/journal-format.js';
import { openCacheStore } from '../src/index.js';
import { catchError, frameJournalRecord, makeCache, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

/** A record framed around raw body bytes (a valid CRC over whatever they are). */
function frameBody(body: Buffer): Buffer {
  const head = Buffer.alloc(12);
  head.writeUInt32LE(0x524a5a53, 0);
  head.writeUInt32LE(body.length, 4);
  head.writeUInt32LE(crc32(body, crc32(head.subarray(4, 8))) >>> 0, 8);
  return Buffer.concat([head, body]);
}

type Loose = Record<string, unknown>;

const cases: [string, string, (bound: string, disk: Loose) => Buffer][] = [
  ['an alias naming a missing entry', 'JOURNAL_INVALID', () => frameJournalRecord([[2, 'c'.repeat(40), 'shard-x', 0, 240]])],
  ['an add with an unsafe blob path', 'UNSAFE_BLOB_PATH', (_bound, disk) => frameJournalRecord([[1, 'e'.repeat(40), { ...disk, blob: '../manifest.json', slice_keys: [] }]])],
  ['an alias of the wrong size', 'SLICE_SIZE_MISMATCH', (bound) => frameJournalRecord([[2, bound, 'shard-y', 0, 241]])],
  ['100,000 stamps', 'ENTRY_INVALID', (bound) => frameJournalRecord([[2, bound, 'shard-z', 0, 240, Array.from({ length: 100_000 }, (_, i) => `s${i}`)]])],
  ['deeply nested MessagePack', 'JOURNAL_INVALID', () => frameBody(Buffer.concat([Buffer.alloc(100_000, 0x91), Buffer.from([0x90])]))],
];

for (const [what, opCode, makeRecord] of cases) {
  it(`${what}: damage at its offset (opCode ${opCode}); readers open, writers refuse, recoverDamagedJournal gets the cache out`, async () => {
    const { root, tensors } = await makeCache(1);
    const [a, b] = [makeTensor([16, 4], 9441), makeTensor([12, 8], 9442)];
    const writer = await openCacheStore(root, { compactOnClose: false });
    await writer.addEntry(toInput(a, 'a', [['a-shard', 0, a.bytes.length]]));
    await writer.addEntry(toInput(b, 'b', [['b-shard', 0, b.bytes.length]]));
    await writer.close();
    // The bad record goes between a's and b's.
    const path = join(root, 'journal.2');
    const journal = await readFile(path);
    const firstEnd = JOURNAL_HEADER_BYTES + 12 + journal.readUInt32LE(JOURNAL_HEADER_BYTES + 4);
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { entries: Record<string, Loose> };
    const bound = tensors[0]!.key;
    await writeFile(path, Buffer.concat([journal.subarray(0, firstEnd), makeRecord(bound, manifest.entries[bound]!), journal.subarray(firstEnd)]));

    const store = await openCacheStore(root);
    try {
      expect(store.getEntry(a.key)).toBeDefined();
      expect(store.getEntry(b.key)).toBeUndefined(); // after the damage: not applied
      const problem = (await store.verify()).problems.find((p) => p.code === 'JOURNAL_INVALID')!;
      expect(problem.message).toMatch(new RegExp(`offset ${firstEnd} has a valid CRC but its operations are not valid \\(${opCode}: .*build --repair`));
      const refused = await catchError(() => store.addEntry(toInput(makeTensor([8, 8], 9443), 'c')));
      expect(refused.code).toBe('JOURNAL_INVALID');
      expect(refused.details).toMatchObject({ reason: 'invalid-ops', opCode, offsetBytes: firstEnd });
      expect((await catchError(() => store.gc())).code).toBe('JOURNAL_INVALID');
      const recovery = (await store.recoverDamagedJournal!())!;
      expect(recovery.keptAs).toMatch(/journal\.2\.damaged-\d+$/);
      expect(recovery.damagedFromOffsetBytes).toBe(firstEnd);
      expect(recovery.salvagedRecords + recovery.droppedRecords).toBe(2);
    } finally {
      await store.close();
    }
    const after = await openCacheStore(root);
    try {
      for (const t of [tensors[0]!, a, b]) expect(after.getEntry(t.key)).toBeDefined();
      expect(after.lookupBySlice('b-shard', 0, b.bytes.length)?.key).toBe(b.key);
      expect((await after.verify({ decode: true })).ok).toBe(true);
    } finally {
      await after.close();
    }
    expect((await readdir(root)).some((name) => name.startsWith('journal.2.damaged-'))).toBe(true);
  });
}
