import { readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** Number of committed-looking blob files (`<40 hex>.bin`) in a cache, 0 if none yet. */
export async function countBlobs(cacheDir: string): Promise<number> {
  try {
    return (await readdir(join(cacheDir, 'blobs'))).filter((name) => /^[0-9a-f]{40}\.bin$/.test(name)).length;
  } catch {
    return 0;
  }
}

/** Polls until the cache has at least `count` blobs. */
export async function waitForBlobs(cacheDir: string, count: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const n = await countBlobs(cacheDir);
    if (n >= count) return n;
    if (Date.now() > deadline) throw new Error(`no ${count} blobs in ${cacheDir} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
