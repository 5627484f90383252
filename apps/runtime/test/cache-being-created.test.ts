// A directory cache its first build is creating (blobs/ and the writer lock, no manifest.json yet)
// opens as the store's NOT_A_CACHE with details.reason 'being-created'. The runtime took it, by its
// code, for a missing cache: CACHE_OPEN_FAILED, not retryable, so a loader gave up (or exited) on a
// cache that exists seconds later. It is CACHE_UNAVAILABLE, retryable, naming the holder; a stopped
// creator (nothing changes until someone resumes it) and no live lock stay CACHE_OPEN_FAILED.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRetryableError } from '../src/errors.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { makeTempDir } from './fixtures.js';

let base: string;
let cleanup: () => Promise<void>;
let made = 0;
beforeAll(async () => {
  ({ dir: base, cleanup } = await makeTempDir('cache-being-created'));
});
afterAll(async () => {
  await cleanup();
});

/** A cache directory as its creator leaves it before its first manifest, with `lock` holding `record` (none: no lock). */
async function makeCreatingDir(record?: string): Promise<string> {
  const root = join(base, `cache-${made++}`);
  await mkdir(join(root, 'blobs'), { recursive: true });
  if (record !== undefined) await writeFile(join(root, 'lock'), record);
  return root;
}

/** A writer lock record as the store writes one (pid and host; no boot or start time to compare). */
function lockRecord(pid: number, host = hostname()): string {
  return JSON.stringify({ pid, host, bootId: null, startTicks: null, pidNamespace: null, token: '0123456789abcdef', createdMs: Date.now() });
}

async function openError(root: string): Promise<{ code?: string; message: string; retryable?: boolean; details: Record<string, unknown> }> {
  const error = await openShardCache(root).catch((reason: unknown) => reason);
  if (!(error instanceof Error)) throw new Error('openShardCache did not fail');
  return error as never;
}

describe('openShardCache of a cache being created', () => {
  it('by a live process of this host (this one): CACHE_UNAVAILABLE, retryable, the holder named', async () => {
    const root = await makeCreatingDir(lockRecord(process.pid));
    const error = await openError(root);
    expect(error.code).toBe('CACHE_UNAVAILABLE');
    expect(error.retryable).toBe(true);
    expect(isRetryableError(error)).toBe(true);
    expect(error.details).toMatchObject({ root, storeCode: 'NOT_A_CACHE', retryable: true, reason: 'being-created', holder: { pid: process.pid, host: hostname() }, holderStopped: false });
    expect(error.message).toContain(`the cache is being created by pid ${process.pid} on ${hostname()} (this host)`);
    expect(error.message).toContain('open the cache again once it has written manifest.json');
  });

  it("by another host's process (cannot be judged dead): retryable too", async () => {
    const root = await makeCreatingDir(lockRecord(4242, 'builder-7'));
    const error = await openError(root);
    expect(error).toMatchObject({ code: 'CACHE_UNAVAILABLE', retryable: true, details: { reason: 'being-created', holder: { pid: 4242, host: 'builder-7' } } });
  });

  it.runIf(process.platform === 'linux')('by a stopped process (SIGSTOP): CACHE_OPEN_FAILED, not retryable, saying to resume it', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      const pid = child.pid!;
      child.kill('SIGSTOP');
      for (let i = 0; i < 500 && !/\) T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')); i++) await new Promise((r) => setTimeout(r, 10));
      const root = await makeCreatingDir(lockRecord(pid));
      const error = await openError(root);
      expect(error).toMatchObject({ code: 'CACHE_OPEN_FAILED', retryable: false, details: { retryable: false, reason: 'being-created', holderStopped: true } });
      expect(error.message).toContain(`kill -CONT ${pid}`);
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  });

  it('without a lock: no cache, as before (CACHE_OPEN_FAILED, not retryable, the build that makes one)', async () => {
    const root = await makeCreatingDir();
    const error = await openError(root);
    expect(error).toMatchObject({ code: 'CACHE_OPEN_FAILED', retryable: false, details: { storeCode: 'NOT_A_CACHE', retryable: false } });
    expect(error.details).not.toHaveProperty('reason');
    expect(error.message).toContain('splitzip build <model> --out');
  });
});
