// A manifest above MAX_MANIFEST_BYTES is refused by every reader (SIZE_INVALID), and adds within every
// per-value limit can add up to one: it was written, and the cache never opened again (nor could
// recoverDamagedManifest mend it). The limit is lowered here through the limits module, for the
// writer and the reader alike, so no test writes half a gigabyte.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type * as Limits from '../src/limits.js';
import { catchError, makeTempDir, makeTensor, toInput } from './helpers.js';

const limit = vi.hoisted(() => ({ bytes: 24 * 1024 }));
vi.mock('../src/limits.js', async (importOriginal) => {
  const original = await importOriginal<typeof Limits>();
  return {
    ...original,
    get MAX_MANIFEST_BYTES() {
      return limit.bytes;
    },
  };
});

const { openCacheStore, recoverDamagedManifest } = await import('../src/index.js');
const { serializeManifest } = await import('../src/manifest-format.js');
const { estimateManifestGrowthBytes } = await import('../src/estimate-manifest-growth.js');
const { FsBackend } = await import('../src/fs-backend.js');

const LIMIT_BYTES = 24 * 1024;
afterEach(() => {
  limit.bytes = LIMIT_BYTES;
  vi.restoreAllMocks();
});

/** Slice keys of ~300 bytes each (long shard names, each its own: the manifest pools repeated ones), all within the per-value limits. */
function bulkySlices(first: number, count: number): [string, number, number][] {
  return Array.from({ length: count }, (_, i) => [`shard-${first + i}-${'s'.repeat(280)}`, 0, 128]);
}

describe('MAX_MANIFEST_BYTES on the writing side', () => {
  it('refuses the add that would take the manifest above the limit (SIZE_INVALID), and the cache still opens', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    let refused: Awaited<ReturnType<typeof catchError>> | undefined;
    let added = 0;
    for (let i = 0; i < 40 && refused === undefined; i++) {
      const tensor = makeTensor([64], 700 + i);
      try {
        await store.addEntries([toInput(tensor, `t${i}`, bulkySlices(i * 10, 10))]);
        added += 1; // journalled: the estimate stands on the journal's bytes until a compaction near the limit
      } catch (error) {
        refused = error as typeof refused;
      }
    }
    expect(refused?.code).toBe('SIZE_INVALID');
    expect(refused?.details).toMatchObject({ limit: LIMIT_BYTES });
    expect(store.size).toBe(added);
    await store.close();
    const size = (await readFile(join(root, 'manifest.json'))).length;
    expect(size).toBeLessThanOrEqual(LIMIT_BYTES);
    const reopened = await openCacheStore(root);
    expect(reopened.size).toBe(added);
    await reopened.close();
  });

  it('refuses an alias that would take it above the limit, before journalling it', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const tensor = makeTensor([64], 800);
    await store.addEntries([toInput(tensor, 't')]);
    let refused: Awaited<ReturnType<typeof catchError>> | undefined;
    for (let i = 0; i < 200 && refused === undefined; i++) {
      refused = await store
        .aliasSlices(bulkySlices(i * 4, 4).map(([shardName, offsetBytes, sizeBytes]) => ({ key: tensor.key, shardName, offsetBytes, sizeBytes })))
        .then(() => undefined, (error: unknown) => error as typeof refused);
    }
    expect(refused?.code).toBe('SIZE_INVALID');
    await store.close();
    const reopened = await openCacheStore(root);
    expect(reopened.size).toBe(1);
    await reopened.close();
    expect((await readFile(join(root, 'manifest.json'))).length).toBeLessThanOrEqual(LIMIT_BYTES);
  });

  it('a compaction that would write a manifest above the limit is SIZE_INVALID, old manifest and journal untouched', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    for (let i = 0; i < 4; i++) await store.addEntries([toInput(makeTensor([64], 900 + i), `t${i}`, bulkySlices(i * 10, 10))]);
    const manifestBefore = await readFile(join(root, 'manifest.json'));
    const journalBefore = await readFile(join(root, `journal.${store.generation}`));
    limit.bytes = 4096; // what the journal holds no longer fits
    const error = await catchError(() => store.compact());
    expect(error.code).toBe('SIZE_INVALID');
    expect(error.message).toContain('MAX_MANIFEST_BYTES');
    expect(error.details).toMatchObject({ limit: 4096 });
    expect(await readFile(join(root, 'manifest.json'))).toEqual(manifestBefore);
    expect(await readFile(join(root, `journal.${store.generation}`))).toEqual(journalBefore);
    await store.close();
    limit.bytes = LIMIT_BYTES;
    const reopened = await openCacheStore(root);
    expect(reopened.size).toBe(4);
    await reopened.close();
  });

  it('recoverDamagedManifest refuses to write a manifest above the limit too', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    for (let i = 0; i < 4; i++) await store.addEntries([toInput(makeTensor([64], 950 + i), `t${i}`, bulkySlices(i * 10, 10))]);
    await store.close();
    // Damaged (its checksum no longer holds), so that recovery has a manifest to write.
    const damaged = Buffer.from(await readFile(join(root, 'manifest.json')));
    damaged[damaged.length - 4] = damaged[damaged.length - 4] === 0x30 ? 0x31 : 0x30;
    await writeFile(join(root, 'manifest.json'), damaged);
    const manifestBefore = await readFile(join(root, 'manifest.json'));
    limit.bytes = 4096;
    const error = await catchError(() => recoverDamagedManifest(root));
    expect(error.code).toBe('SIZE_INVALID');
    expect(await readFile(join(root, 'manifest.json'))).toEqual(manifestBefore);
  });

  it("JSON.stringify's RangeError (a string too long for V8) is SIZE_INVALID", () => {
    vi.spyOn(JSON, 'stringify').mockImplementationOnce(() => {
      throw new RangeError('Invalid string length');
    });
    let error: unknown;
    try {
      serializeManifest([], { generation: 2, chunkSize: 64, coverageMin: 0.99 });
    } catch (caught) {
      error = caught;
    }
    expect(error).toMatchObject({ code: 'SIZE_INVALID', details: { limit: LIMIT_BYTES } });
  });

  it("recoverDamagedManifest's SIZE_INVALID comes before anything changes (no kept copy, no new journal)", async () => {
    limit.bytes = 1024 * 1024;
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    await store.addEntries([toInput(makeTensor([64], 7000), 't')]);
    await store.compact();
    for (let i = 1; i < 30; i++) await store.addEntries([toInput(makeTensor([64], 7000 + i), `t${i}`)]);
    await store.close();
    const damaged = Buffer.from(await readFile(join(root, 'manifest.json')));
    damaged[damaged.length - 4] = damaged[damaged.length - 4] === 0x30 ? 0x31 : 0x30;
    await writeFile(join(root, 'manifest.json'), damaged);
    limit.bytes = 8192;
    const before = (await readdir(root)).sort();
    for (let attempt = 0; attempt < 2; attempt++) expect((await catchError(() => recoverDamagedManifest(root))).code).toBe('SIZE_INVALID');
    expect((await readdir(root)).sort()).toEqual(before);
  });

  it("recoverDamagedJournal's SIZE_INVALID leaves no file behind (no kept copy, no next journal)", async () => {
    limit.bytes = 1024 * 1024;
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    for (let i = 0; i < 30; i++) await store.addEntries([toInput(makeTensor([64], 6000 + i), `t${i}`, [[`s-${i}.safetensors`, 0, 128]])]);
    await store.compact();
    await store.addEntries([toInput(makeTensor([64], 6100), 'late')]);
    const generation = store.generation;
    await store.close();
    const journalPath = join(root, `journal.${generation}`);
    const journal = Buffer.from(await readFile(journalPath));
    journal[8] = journal[8]! ^ 0xff; // the header's generation is no longer this one's
    await writeFile(journalPath, journal);
    const damaged = await openCacheStore(root, { compactOnClose: false });
    limit.bytes = 4096;
    const before = (await readdir(root)).sort();
    for (let attempt = 0; attempt < 2; attempt++) expect((await catchError(() => damaged.recoverDamagedJournal!())).code).toBe('SIZE_INVALID');
    expect((await readdir(root)).sort()).toEqual(before);
    await damaged.close();
  });

  it('the estimate is an upper bound: no add is journalled that the next compaction could not fold (JSON is larger than the journal)', async () => {
    limit.bytes = 64 * 1024;
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    let refused: Awaited<ReturnType<typeof catchError>> | undefined;
    for (let i = 0; i < 400 && refused === undefined; i++) {
      refused = await store
        .addEntries([toInput(makeTensor([64], 5000 + i), `model.layers.${i}.mlp.weight`, [['model-00001-of-00002.safetensors', i * 128, 128]])])
        .then(() => undefined, (error: unknown) => error as typeof refused);
      // Every add accepted: the manifest a compaction writes now still fits (serializeManifest refuses one that does not).
      if (refused === undefined) serializeManifest(store.entries(), { generation: store.generation + 1, chunkSize: store.chunkSize, coverageMin: store.coverageMin });
    }
    expect(refused?.code).toBe('SIZE_INVALID');
    await store.compact(); // it was SIZE_INVALID: the journal held more than any manifest could
    expect((await readFile(join(root, 'manifest.json'))).length).toBeLessThanOrEqual(limit.bytes);
    await store.close();
  });

  // Found in review: the estimate measured the manifest at this generation, and the compaction
  // writes the next one, whose number may be a digit longer (9 -> 10): an add accepted at exactly
  // the limit then made every compaction SIZE_INVALID.
  it('allows for a longer generation number: an add accepted at generation 9 still folds at 10', async () => {
    limit.bytes = 1024 * 1024;
    const toGeneration9 = async (root: string) => {
      const store = await openCacheStore(root, { create: true, compactOnClose: false });
      for (let i = 0; store.generation < 9; i++) {
        await store.addEntries([toInput(makeTensor([64], 100 + i), `t${i}`)]);
        await store.compact();
      }
      return store;
    };
    // The size of the manifest at generation 10 with one more entry: measured on a scratch cache.
    const scratchRoot = await makeTempDir();
    const scratch = await toGeneration9(scratchRoot);
    await scratch.addEntries([toInput(makeTensor([64], 999), 'last')]);
    await scratch.compact();
    const atTen = (await readFile(join(scratchRoot, 'manifest.json'))).length;
    await scratch.close();

    const root = await makeTempDir();
    const store = await toGeneration9(root);
    expect(store.generation).toBe(9);
    for (const bytes of [atTen - 1, atTen, atTen + 32]) {
      limit.bytes = bytes;
      const refused = await store.addEntries([toInput(makeTensor([64], 999), 'last')]).then(
        () => undefined,
        (error: unknown) => error as { code?: string },
      );
      if (refused !== undefined) {
        expect(refused.code, `limit ${bytes}`).toBe('SIZE_INVALID');
        continue;
      }
      await store.compact(); // every add the estimate accepts folds
      expect((await readFile(join(root, 'manifest.json'))).length).toBeLessThanOrEqual(bytes);
      break;
    }
    expect(store.generation).toBe(10);
    await store.close();
  });

  it("counts another writer's journalled adds too (read by catch-up)", async () => {
    limit.bytes = 64 * 1024;
    const root = await makeTempDir();
    const first = await openCacheStore(root, { create: true, compactOnClose: false });
    const second = await openCacheStore(root, { compactOnClose: false });
    const add = (store: typeof first, i: number) =>
      store.addEntries([toInput(makeTensor([64], 5500 + i), `model.layers.${i}.mlp.weight`, [[`model-${i}-of-99999.safetensors`, i * 128, 128]])]);
    // The first writer fills the journal to about half the limit; the second, caught up on it, goes on.
    let i = 0;
    for (; i < 60; i++) await add(first, i);
    let refused: Awaited<ReturnType<typeof catchError>> | undefined;
    for (; i < 400 && refused === undefined; i++) {
      refused = await add(second, i).then(() => undefined, (error: unknown) => error as typeof refused);
      if (refused === undefined) serializeManifest(second.entries(), { generation: second.generation + 1, chunkSize: second.chunkSize, coverageMin: second.coverageMin });
    }
    expect(refused?.code).toBe('SIZE_INVALID');
    expect(first.generation).toBe(1); // (no compaction by the first writer made the second's estimate exact)
    await second.compact();
    await second.close();
    await first.close();
  });

  it('counts a slice tuple as its JSON: escaped shard names, long numbers, stamps', () => {
    const cases = [
      ['\x01'.repeat(100), 0, 128],
      ['s', Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER - 1],
      ['sh"ard\\é', 12, 34, ['a\n', 'st"amp', 'x'.repeat(40)]],
    ] as const;
    for (const slice of cases) {
      const json = Buffer.byteLength(JSON.stringify(slice)) + 1; // with its comma
      expect(estimateManifestGrowthBytes([{ kind: 'alias', key: 'k', slice }])).toBe(json);
      expect(estimateManifestGrowthBytes([{ kind: 'rebind', key: 'k', slice }])).toBe(json);
    }
  });

  it('refuses aliases of escaped shard names before the manifest they make is too large (estimated at their JSON length)', async () => {
    limit.bytes = 16 * 1024;
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const tensor = makeTensor([64], 8000);
    await store.addEntries([toInput(tensor, 't')]);
    await store.compact();
    let refused: Awaited<ReturnType<typeof catchError>> | undefined;
    for (let i = 0; i < 6 && refused === undefined; i++) {
      refused = await store
        .aliasSlices([{ key: tensor.key, shardName: `${i}${'\x01'.repeat(1000)}`, offsetBytes: 0, sizeBytes: 128 }])
        .then(() => undefined, (error: unknown) => error as typeof refused);
    }
    expect(refused?.code).toBe('SIZE_INVALID');
    await store.compact(); // SIZE_INVALID before: 1,000 bytes estimated, 6,000 written
    await store.close();
  });

  it('a compaction near the limit that fails before its seal fails only the request that needed it; the rest of the batch commits', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const tensor = makeTensor([64], 8100);
    await store.addEntries([toInput(tensor, 't')]);
    await store.compact();
    await store.aliasSlices([{ key: tensor.key, shardName: 'first', offsetBytes: 0, sizeBytes: 128 }]); // the estimate is not exact now
    limit.bytes = (await readFile(join(root, 'manifest.json'))).length + 2000;
    const full = Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    vi.spyOn(FsBackend.prototype, 'createJournal').mockRejectedValueOnce(full);
    // One group-committed batch: the small alias fits the estimate, the large one needs a compaction, which fails.
    const [small, large] = await Promise.allSettled([
      store.aliasSlices([{ key: tensor.key, shardName: 'small', offsetBytes: 0, sizeBytes: 128 }]),
      store.aliasSlices([{ key: tensor.key, shardName: 'l'.repeat(3000), offsetBytes: 0, sizeBytes: 128 }]),
    ]);
    expect(small).toEqual({ status: 'fulfilled', value: [true] });
    expect(large).toMatchObject({ status: 'rejected', reason: full });
    await store.close();
    limit.bytes = LIMIT_BYTES;
    const reopened = await openCacheStore(root);
    expect(reopened.lookupBySlice('small', 0, 128)?.key).toBe(tensor.key);
    expect(reopened.getEntry(tensor.key)?.sliceKeys).toHaveLength(2);
    await reopened.close();
  });
});
