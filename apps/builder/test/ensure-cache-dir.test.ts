// A build's cache directory is made by the store's create, which takes the writer lock right after
// its mkdir. ensureCacheDir made it first, and it stood empty until the store's lock: a `verify`,
// `inspect` or loader opening it then read NOT_A_CACHE, where a cache was being created. It makes
// the missing parents only; the build still creates the whole path.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { openCacheStore } from '@splitzip/store';
import { ensureCacheDir } from '../src/ensure-cache-dir.js';

const parent = mkdtempSync(join(tmpdir(), 'ensure-cache-dir-'));
afterAll(() => rmSync(parent, { recursive: true, force: true }));

it('makes the missing parents, not the cache directory itself (the store makes it, then takes its lock)', async () => {
  const cacheDir = join(parent, 'a', 'b', 'cache');
  await ensureCacheDir(cacheDir);
  expect(existsSync(join(parent, 'a', 'b'))).toBe(true);
  expect(existsSync(cacheDir)).toBe(false);
  const store = await openCacheStore(cacheDir, { create: true });
  await store.close();
  expect(existsSync(join(cacheDir, 'manifest.json'))).toBe(true);
});
