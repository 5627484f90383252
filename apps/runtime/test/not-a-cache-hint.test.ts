import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as store from '@splitzip/store';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, standardTensors, writeModel } from './fixtures.js';

// A location that holds no cache: the store's hint, "open with create: true", names an option
// openShardCache refuses (a loader opens what a build made). The runtime's message names the build
// that makes one instead; its code and details stay.
vi.mock('@splitzip/store', async (importOriginal) => {
  const actual = await importOriginal<typeof store>();
  return { ...actual, openCacheStore: vi.fn(actual.openCacheStore) };
});

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('not-a-cache'));
});
afterAll(async () => {
  await cleanup();
});

describe('openShardCache where there is no cache', () => {
  it('an empty directory: CACHE_OPEN_FAILED, the store code kept, and the build that makes one', async () => {
    const dir = join(root, 'empty');
    await mkdir(dir);
    const error = await openShardCache(dir).catch((reason: unknown) => reason);
    expect(error).toMatchObject({ code: 'CACHE_OPEN_FAILED', details: { root: dir, storeCode: 'NOT_A_CACHE', retryable: false } });
    const { message } = error as Error;
    // The directory named once as where, once in the command (until 2026-12-07 a third time, `(file <dir>/manifest.json)`).
    expect(message).toBe(`cannot open the shard cache at ${dir}: NOT_A_CACHE: no manifest.json: build one with \`splitzip build <model> --out ${dir}\``);
    expect(message).not.toContain('create: true');
    // What it says is what a runtime user can do: openShardCache takes no `create`.
    await expect(openShardCache(dir, { create: true } as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('a missing directory says the same', async () => {
    const dir = join(root, 'no-such-cache');
    await expect(openShardCache(dir)).rejects.toMatchObject({
      code: 'CACHE_OPEN_FAILED',
      details: { storeCode: 'NOT_A_CACHE' },
      message: expect.stringMatching(/: build one with `splitzip build <model> --out .*no-such-cache`$/),
    });
  });

  it('a file, not a directory: the store says so, and no build is suggested over it', async () => {
    const file = join(root, 'a-file');
    await writeFile(file, 'x');
    const error = (await openShardCache(file).catch((reason: unknown) => reason)) as Error;
    expect(error).toMatchObject({ code: 'CACHE_OPEN_FAILED', details: { storeCode: 'NOT_A_CACHE' } });
    expect(error.message).toContain('the cache path is a file, not a directory');
    expect(error.message).not.toContain('splitzip build');
  });

  // The store's own s3:// refusals (s3-cache-store.ts), as it words them: no gateway needed.
  it.each([
    ['a prefix without cache.json', new store.StoreError('NOT_A_CACHE', 'no cache.json below this prefix (open with create: true to make a new cache)', { path: 's3://weights/cache/cache.json' }), 'no cache.json below this prefix', ''],
    [
      'a bucket that does not exist',
      new store.StoreError('NOT_A_CACHE', 'the bucket weights does not exist at http://127.0.0.1:9000 (a build with create makes the cache; createBucket makes the bucket too)', { path: 's3://weights/cache/cache.json' }),
      'the bucket weights does not exist at http://127.0.0.1:9000',
      ' (which makes the bucket too)',
    ],
  ])('s3://: %s', async (_label, refusal, said, bucket) => {
    vi.mocked(store.openCacheStore).mockRejectedValueOnce(refusal);
    const error = await openShardCache('s3://weights/cache').catch((reason: unknown) => reason);
    expect(error).toMatchObject({
      code: 'CACHE_OPEN_FAILED',
      details: { root: 's3://weights/cache', storeCode: 'NOT_A_CACHE', retryable: false },
      message: `cannot open the shard cache at s3://weights/cache: NOT_A_CACHE: ${said}: build one with \`splitzip build <model> --out s3://weights/cache\`${bucket}`,
    });
    expect((error as Error).cause).toBe(refusal);
  });
});

describe('a model directory given as the cache, and a cut-off manifest', () => {
  it('a model directory: it looks like one, and no build into it is suggested', async () => {
    const dir = join(root, 'a-model');
    const model = await writeModel(dir, standardTensors());
    await model.close();
    const error = (await openShardCache(dir).catch((reason: unknown) => reason)) as Error & { details: Record<string, unknown> };
    expect(error).toMatchObject({ code: 'CACHE_OPEN_FAILED', details: { storeCode: 'NOT_A_CACHE', reason: 'model-directory' } });
    expect(error.details.modelFiles).toEqual(expect.arrayContaining([expect.stringMatching(/\.safetensors$/)]));
    expect(error.message).toContain('it looks like a model directory');
    expect(error.message).toContain(`\`splitzip build ${dir} --out <cache dir>\``);
    expect(error.message).not.toContain(`--out ${dir}`);
  });

  it('a cut-off or empty manifest names verify and build --repair', async () => {
    const model = await writeModel(join(root, 'cut-model'), standardTensors());
    const dir = join(root, 'cut-cache');
    await buildCache(model, dir);
    await model.close();
    const manifest = await readFile(join(dir, 'manifest.json'));
    for (const damaged of [manifest.subarray(0, manifest.length >> 1), new Uint8Array(0)]) {
      await writeFile(join(dir, 'manifest.json'), damaged);
      const error = (await openShardCache(dir).catch((reason: unknown) => reason)) as Error;
      expect(error).toMatchObject({ code: 'CACHE_OPEN_FAILED', details: { storeCode: 'MANIFEST_INVALID' } });
      expect(error.message).toContain(`\`splitzip verify ${dir}\``);
      expect(error.message).toContain(`\`splitzip build <model> --out ${dir} --repair\``);
    }
  });
});
