// File stamps that look alike: a file rewritten in place with its modification time restored under an
// open model, a chmod, and a cache whose bindings hold stamps of the form before 2026-12-05
// (`<size>:<mtime ns>`), which two files of one size and mtime share.
import { execFileSync } from 'node:child_process';
import { chmod, copyFile, open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSafetensorsModel, readFileStamp, type SafetensorsModel } from '@splitzip/safetensors';
import { openCacheStore } from '@splitzip/store';
import { createFileReader } from '../src/create-file-reader.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, readAllRaw, sameBytes, tunedWeights, writeModel, type FixtureTensor } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('stamp-edges'));
});
afterAll(async () => {
  await cleanup?.();
});

/** One shard, two BF16 tensors; `seed` changes b.weight's values only. */
const tensors = (seed = 0): FixtureTensor[] => tunedWeights(['a', 'b'], 21, seed);

/** Sets `path`'s access and modification times to `reference`'s, to the nanosecond (coreutils touch -r). */
function copyTimes(reference: string, path: string): void {
  execFileSync('touch', ['-r', reference, path]);
}

async function expectOwnBytes(model: SafetensorsModel, name: string, data: Uint8Array): Promise<void> {
  expect(sameBytes(data, (await readAllRaw(model)).get(name) as Uint8Array), name).toBe(true);
}

describe('stamps that look alike', () => {
  it('a shard rewritten in place under an open model with its size and mtime kept (cp -p over it, rsync --inplace -t): the next load checks its cached tensors again, never serving their old bytes', async () => {
    const dir = join(root, 'in-place');
    const cacheDir = join(root, 'in-place-cache');
    const model = await writeModel(dir, tensors(), 1 << 20);
    const shardPath = model.shards[0]!.path;
    await buildCache(model, cacheDir);
    const cache = await openShardCache(cacheDir);
    try {
      expect((await loadTensor({ model, name: 'b.weight' }, { cache })).report).toMatchObject({ source: 'cache', reason: 'cached' });
      // Another revision of one layout, written through the same inode, then the old times put back.
      const reference = join(root, 'in-place-times');
      await copyFile(shardPath, reference);
      copyTimes(shardPath, reference);
      const next = await writeModel(join(root, 'in-place-next'), tensors(50), 1 << 20);
      const bytes = await readFile(next.shards[0]!.path);
      await next.close();
      const handle = await open(shardPath, 'r+');
      await handle.write(bytes, 0, bytes.length, 0);
      await handle.close();
      copyTimes(reference, shardPath);
      const loaded = await loadTensor({ model, name: 'b.weight' }, { cache });
      // The new bytes, as a raw read of the open model gives them: stale, never the cached old ones.
      expect(loaded.report).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(sameBytes(loaded.data, tensors(50)[1]!.data)).toBe(true);
    } finally {
      await cache.close();
      await model.close();
    }
  });

  it('a shard rewritten in place under an open model with its size and mtime kept and its tensors in another order: SHARD_CHANGED, with or without a cache or a reader by path, never the old offsets\' bytes', async () => {
    const dir = join(root, 'reordered');
    const cacheDir = join(root, 'reordered-cache');
    const model = await writeModel(dir, tensors(), 1 << 20);
    const shardPath = model.shards[0]!.path;
    await buildCache(model, cacheDir);
    const cache = await openShardCache(cacheDir);
    try {
      const reference = join(root, 'reordered-times');
      await copyFile(shardPath, reference);
      copyTimes(shardPath, reference);
      // The same tensors, b first: a header of the same length, each tensor at the other's offsets.
      const next = await writeModel(join(root, 'reordered-next'), [...tensors()].reverse(), 1 << 20);
      const bytes = await readFile(next.shards[0]!.path);
      await next.close();
      expect(bytes.length).toBe(model.shards[0]!.fileBytes);
      const handle = await open(shardPath, 'r+');
      await handle.write(bytes, 0, bytes.length, 0);
      await handle.close();
      copyTimes(reference, shardPath);
      for (const options of [{ cache }, { cache: null }, { cache, reader: createFileReader() }, { cache: null, reader: createFileReader() }]) {
        await expect(loadTensor({ model, name: 'a.weight' }, options)).rejects.toMatchObject({ code: 'SHARD_CHANGED' });
      }
      // A model opened again reads the file as it is now.
      const again = await openSafetensorsModel(shardPath);
      try {
        const loaded = await loadTensor({ model: again, name: 'a.weight' }, { cache });
        expect(sameBytes(loaded.data, tensors()[0]!.data)).toBe(true);
      } finally {
        await again.close();
      }
    } finally {
      await cache.close();
      await model.close();
    }
  });

  it('a chmod under an open model: no SHARD_CHANGED, with or without a reader that opens the path; the bytes are checked once, then cached again', async () => {
    const dir = join(root, 'chmod');
    const cacheDir = join(root, 'chmod-cache');
    const model = await writeModel(dir, tensors(), 1 << 20);
    await buildCache(model, cacheDir);
    const cache = await openShardCache(cacheDir);
    const reader = createFileReader();
    try {
      expect((await loadTensor({ model, name: 'a.weight' }, { cache })).report).toMatchObject({ source: 'cache', reason: 'cached' });
      await chmod(model.shards[0]!.path, 0o600);
      const checked = await loadTensor({ model, name: 'a.weight' }, { cache, reader });
      expect(checked.report).toMatchObject({ source: 'raw', reason: 'unchecked' });
      await expectOwnBytes(model, 'a.weight', checked.data);
      await cache.flushObjectStamps!();
      expect((await loadTensor({ model, name: 'a.weight' }, { cache, reader })).report).toMatchObject({ source: 'cache', reason: 'cached' });
    } finally {
      await reader.close();
      await cache.close();
      await model.close();
    }
  });

  it("a cache whose bindings hold stamps of the old form (<size>:<mtime ns>): a fine-tune of the base's size and mtime is checked, with fileSources 'check' and 'trust' alike", async () => {
    const baseDir = join(root, 'legacy-base');
    const tunedDir = join(root, 'legacy-tuned');
    const cacheDir = join(root, 'legacy-cache');
    const base = await writeModel(baseDir, tensors(), 1 << 20);
    await (await writeModel(tunedDir, tensors(100), 1 << 20)).close();
    for (const name of await readdir(baseDir)) copyTimes(join(baseDir, name), join(tunedDir, name));
    // Built, then bound the way releases before 2026-12-05 bound slices: `<size>:<mtime ns>` only.
    const keys = await buildCache(base, cacheDir, { noAlias: ['a.weight', 'b.weight'] });
    const store = await openCacheStore(cacheDir);
    const legacy = readFileStamp(base.shards[0]!.path)!.split(':').slice(0, 2).join(':');
    await store.aliasSlices(base.tensors.map((t) => ({ key: keys.get(t.name)!, ...t.slice, stamp: legacy })));
    await store.close();
    await base.close();
    const tuned = await openSafetensorsModel(tunedDir);
    expect(readFileStamp(tuned.shards[0]!.path)!.startsWith(`${legacy}:`)).toBe(true);
    try {
      for (const fileSources of ['check', 'trust'] as const) {
        const cache = await openShardCache(cacheDir, { fileSources });
        try {
          const loaded = await loadTensor({ model: tuned, name: 'b.weight' }, { cache });
          expect(loaded.report, fileSources).toMatchObject({ source: 'raw', reason: 'stale' });
          await expectOwnBytes(tuned, 'b.weight', loaded.data);
        } finally {
          await cache.close();
        }
      }
    } finally {
      await tuned.close();
    }
  });
});
