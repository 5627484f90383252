// recoverDamagedManifest with a journal whose header is damaged too (review of f4348db): the
// header's version field is used where it still reads 1 or 2, else the journal is replayed as
// version 2 (every op still checked). Read as version 1, a format-3 cache's journal lost its
// second-binding ops, and an add among them its whole entry (its blob then an orphan).
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore, recoverDamagedManifest } from '../src/index.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';
import { fileStamp } from './unbound-cache.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';

/**
 * A format-3 cache whose version-2 journal holds an add binding beside another entry (c), an
 * alias beside another (a at 480) and an add beside that (d); then its manifest's checksum and
 * its journal's header damaged by `damageHeader`.
 */
async function makeDamagedCache(damageHeader: (header: Buffer) => void) {
  const root = await makeTempDir();
  const t: TestTensor[] = [];
  for (let i = 0; i < 4; i++) t.push(makeTensor([40, 6], 500 + i));
  const store = await openCacheStore(root, { create: true, sliceBindingsPerFile: true, compactOnClose: false });
  await store.addEntries([toInput(t[0]!, 'a', [[SHARD, 0, 480, [fileStamp(0)]]])]);
  // The first second binding: a compaction to format 3, journal version 2 after it.
  await store.addEntries([toInput(t[1]!, 'b', [[SHARD, 0, 480, [fileStamp(1)]]])]);
  await store.addEntries([toInput(t[2]!, 'c', [[SHARD, 0, 480, [fileStamp(2)]]])]);
  await store.aliasSlices([{ key: t[0]!.key, shardName: SHARD, offsetBytes: 480, sizeBytes: 480, stamp: fileStamp(0) }]);
  await store.addEntries([toInput(t[3]!, 'd', [[SHARD, 480, 480, [fileStamp(3)]]])]);
  const generation = store.generation;
  await store.close();
  const journalPath = join(root, `journal.${generation}`);
  const journal = await readFile(journalPath);
  expect(journal.readUInt32LE(8)).toBe(2);
  damageHeader(journal);
  await writeFile(journalPath, journal);
  const manifest = await readFile(join(root, 'manifest.json'));
  const at = manifest.lastIndexOf('"body_crc32":"') + '"body_crc32":"'.length;
  manifest[at] = manifest[at] === 0x30 ? 0x31 : 0x30;
  await writeFile(join(root, 'manifest.json'), manifest);
  return { root, t };
}

describe('recoverDamagedManifest, journal header damaged as well', () => {
  const damages: [string, (header: Buffer) => void][] = [
    ['magic (version field intact: 2)', (header) => header.writeUInt8(header.readUInt8(0) ^ 1, 0)],
    ['version field (reads 0)', (header) => header.writeUInt32LE(0, 8)],
    ['version field (reads 1026)', (header) => header.writeUInt32LE(1026, 8)],
  ];
  for (const [what, damage] of damages) {
    it(`${what}: every journalled op kept, second bindings included; no entry lost, no orphan blob`, async () => {
      const { root, t } = await makeDamagedCache(damage);
      const report = await recoverDamagedManifest(root);
      expect(report).not.toBeNull();
      expect(report!.journalEntries).toBe(2);
      expect(report!.droppedOps).toBe(0);
      const store = await openCacheStore(root);
      expect([...store.entries()]).toHaveLength(4);
      for (const tensor of t) expect(store.getEntry(tensor.key)).toBeDefined();
      expect((await store.gc({ dryRun: true })).orphanBlobs).toEqual([]);
      // The salvaged manifest's own bindings are dropped (salvageManifest); the journal's are kept.
      expect(store.lookupSliceBindings(SHARD, 0, 480).map((b) => b.entry.key)).toEqual([t[2]!.key]);
      expect(new Set(store.lookupSliceBindings(SHARD, 480, 480).map((b) => b.entry.key))).toEqual(new Set([t[0]!.key, t[3]!.key]));
      await store.close();
    });
  }
});
