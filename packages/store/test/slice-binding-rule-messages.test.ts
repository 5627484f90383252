// A manifest's or journal's bindings that break the rule of one binding per file say which rule
// (review of f4348db): SLICE_CONFLICT details.reason and a message naming it, carried up as
// MANIFEST_INVALID details.entryReason / JOURNAL_INVALID details.opReason. Before, each said only
// "slice … is bound to X; refusing to bind it to Y".
import { readFile, writeFile } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SLICE_BINDINGS, openCacheStore, type StoreError } from '../src/index.js';
import { JOURNAL_HEADER_BYTES, encodeJournalRecords } from '../src/journal-format.js';
import { catchError, removeTempDirs, type TestTensor } from './helpers.js';
import { fileStamp, makeUnboundCache } from './unbound-cache.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
/** makeUnboundCache's first seed here (the keys, whose order breaks ties, these cases were written against). */
const FIRST_SEED = 400;
const OBJECT_STAMP = 'etag:"0123456789abcdef0123456789abcdef"';

/** A format-3 cache (compacted) whose slice is bound to entries 0 and 1 (file stamps 0, 1), and its manifest text. */
async function makeTwoBindings(count: number) {
  const { root, tensors } = await makeUnboundCache(count, FIRST_SEED);
  const store = await openCacheStore(root, { sliceBindingsPerFile: true });
  await store.aliasSlices([{ key: tensors[0]!.key, ...SLICE, stamp: fileStamp(0) }, { key: tensors[1]!.key, ...SLICE, stamp: fileStamp(1) }]);
  await store.close();
  const text = await readFile(join(root, 'manifest.json'), 'utf8');
  expect(text.startsWith('{"format":3,')).toBe(true);
  return { root, tensors, text };
}

/** Writes manifest text with its checksum recomputed: entry damage, not a failed checksum. */
async function writeSigned(root: string, text: string): Promise<void> {
  const body = text.replace(/,"body_crc32":"[0-9a-f]{8}"}\n$/, '}');
  const crc = (crc32(Buffer.from(body)) >>> 0).toString(16).padStart(8, '0');
  await writeFile(join(root, 'manifest.json'), `${body.slice(0, -1)},"body_crc32":"${crc}"}\n`);
}

async function expectEntryDamage(root: string, rule: string, named: RegExp): Promise<void> {
  const error = (await catchError(() => openCacheStore(root))) as StoreError;
  expect(error.code).toBe('MANIFEST_INVALID');
  expect(error.details.reason).toBe('entry-invalid');
  expect(error.details.entryCode).toBe('SLICE_CONFLICT');
  expect(error.details.entryReason).toBe(rule);
  const cause = error.cause as StoreError;
  expect(cause.details.reason).toBe(rule);
  expect(cause.message).toMatch(named);
  expect(error.message).toMatch(named);
}

describe('a manifest breaking the rule', () => {
  it(`format 3 with more than MAX_SLICE_BINDINGS bindings: too-many-bindings`, async () => {
    const count = MAX_SLICE_BINDINGS + 1;
    const { root, tensors, text } = await makeTwoBindings(count);
    const m = JSON.parse(text) as { entries: Record<string, { slice_keys: unknown[] }> };
    const template = JSON.stringify(m.entries[tensors[0]!.key]!.slice_keys);
    for (let i = 2; i < count; i++) m.entries[tensors[i]!.key]!.slice_keys = JSON.parse(template.replace(JSON.stringify(fileStamp(0)), JSON.stringify(fileStamp(i))));
    await writeSigned(root, `${JSON.stringify(m)}\n`);
    await expectEntryDamage(root, 'too-many-bindings', /MAX_SLICE_BINDINGS \(8\)/);
  });

  it('format 3, a binding without a file stamp beside another: binding-without-file-stamp', async () => {
    const { root, text } = await makeTwoBindings(2);
    await writeSigned(root, text.replace(JSON.stringify(fileStamp(1)), JSON.stringify(OBJECT_STAMP)));
    await expectEntryDamage(root, 'binding-without-file-stamp', /must hold a file stamp/);
  });

  it('format 3, one stamp held by two bindings: stamp-held-twice', async () => {
    const { root, text } = await makeTwoBindings(2);
    await writeSigned(root, text.replace(JSON.stringify(fileStamp(1)), JSON.stringify(fileStamp(0))));
    await expectEntryDamage(root, 'stamp-held-twice', /held by one binding only/);
  });

  it('format 2 with two bindings: second-binding-in-format-2', async () => {
    const { root, text } = await makeTwoBindings(2);
    await writeSigned(root, text.replace('{"format":3,', '{"format":2,'));
    await expectEntryDamage(root, 'second-binding-in-format-2', /format-2 manifest holds one binding per slice/);
  });
});

describe('a journal breaking the rule (JOURNAL_INVALID invalid-ops)', () => {
  /** A cache whose slice is bound to entry 0, its journal (version `version`) holding `ops` after its header. */
  async function withJournal(version: number, ops: (tensors: TestTensor[]) => Parameters<typeof encodeJournalRecords>[0]) {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const store = await openCacheStore(root);
    await store.aliasSlices([{ key: tensors[0]!.key, ...SLICE, stamp: fileStamp(0) }]);
    await store.compact();
    const generation = store.generation;
    await store.close();
    const path = join(root, `journal.${generation}`);
    const header = await readFile(path);
    expect(header.length).toBe(JOURNAL_HEADER_BYTES);
    header.writeUInt32LE(version, 8);
    await writeFile(path, Buffer.concat([header, encodeJournalRecords(ops(tensors))]));
    return root;
  }

  const cases: [string, number, (t: TestTensor[]) => Parameters<typeof encodeJournalRecords>[0], RegExp][] = [
    ['second-binding-in-format-2', 1, (t) => [{ kind: 'alias', key: t[1]!.key, slice: [SHARD, 0, 480, [fileStamp(1)]] }], /version-1 journal holds one binding per slice/],
    ['stamp-held-twice', 2, (t) => [{ kind: 'alias', key: t[1]!.key, slice: [SHARD, 0, 480, [fileStamp(0)]] }], /held by one binding only/],
    ['binding-without-file-stamp', 2, (t) => [{ kind: 'alias', key: t[1]!.key, slice: [SHARD, 0, 480, [OBJECT_STAMP]] }], /must hold a file stamp/],
  ];
  for (const [rule, version, ops, named] of cases) {
    it(`version ${version}: ${rule}`, async () => {
      const root = await withJournal(version, ops);
      const reader = await openCacheStore(root, { compactOnClose: false });
      const damage = reader.journalDamage!;
      await reader.close();
      expect(damage.code).toBe('JOURNAL_INVALID');
      expect(damage.details.reason).toBe('invalid-ops');
      expect(damage.details.opCode).toBe('SLICE_CONFLICT');
      expect(damage.details.opReason).toBe(rule);
      expect((damage.cause as StoreError).details.reason).toBe(rule);
      expect(damage.message).toMatch(named);
    });
  }

  it("a caller's own conflict keeps its plain message (no reason)", async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const store = await openCacheStore(root);
    await store.aliasSlices([{ key: tensors[0]!.key, ...SLICE, stamp: fileStamp(0) }]);
    const error = (await catchError(() => store.aliasSlices([{ key: tensors[1]!.key, ...SLICE, stamp: fileStamp(1) }]))) as StoreError;
    await store.close();
    expect(error.code).toBe('SLICE_CONFLICT');
    expect(error.details.reason).toBeUndefined();
    expect(error.message).toMatch(/refusing to bind it to [0-9a-f]{40} \(this call\)/);
  });
});
