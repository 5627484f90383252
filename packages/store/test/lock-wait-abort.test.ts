// A local cache's waits for the writer lock end at the handle's signal (a CLI's Ctrl-C): `splitzip
// gc` behind a stopped build's lock ignored Ctrl-C for its whole 30 s wait, then said LOCK_TIMEOUT.
import { writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { catchError, makeCache, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

/** A writer lock held by a live process other than this one (the test runner's parent). */
function liveLock(): string {
  return JSON.stringify({ pid: process.ppid, host: hostname(), bootId: null, startTicks: null, token: 'cccccccccccccccc', createdMs: Date.now() });
}

describe("a local cache's lock waits and its signal", () => {
  // The lock timeout is far beyond the test's own: a wait the signal does not end fails the test.
  it('a writer session waiting for a live holder rejects ABORTED, the reason its cause, once the signal aborts; the holder\'s lock stays', { timeout: 20_000 }, async () => {
    const { root } = await makeCache();
    const lock = liveLock();
    await writeFile(join(root, 'lock'), lock);
    const controller = new AbortController();
    const store = await openCacheStore(root, { lockTimeoutMs: 120_000, signal: controller.signal });
    try {
      const reason = new Error('interrupted (SIGINT)');
      const waiting = catchError(() => store.gc());
      setTimeout(() => controller.abort(reason), 200);
      const error = await waiting;
      expect(error.code).toBe('ABORTED');
      expect(error.cause).toBe(reason);
      expect(error.message).toMatch(new RegExp(`the wait for the writer lock held by pid ${process.ppid} on .* was aborted`));
    } finally {
      await store.close();
    }
    const { readFile } = await import('node:fs/promises');
    expect(await readFile(join(root, 'lock'), 'utf8')).toBe(lock);
  });

  it('an aborted signal does not stop a session whose lock is free', async () => {
    const { root } = await makeCache();
    const controller = new AbortController();
    controller.abort(new Error('too late'));
    const store = await openCacheStore(root, { signal: controller.signal });
    try {
      expect((await store.gc()).dryRun).toBe(false);
    } finally {
      await store.close();
    }
  });
});
