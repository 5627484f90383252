// verify, inspect and gc of a cache being created: CACHE_BEING_CREATED worded by the holder's state
// as the store reports it (NOT_A_CACHE, details.reason 'being-created'). A holder held by a debugger
// (the store's holderTraced: state t) was said to be stopped, "resume it with `kill -CONT`", which
// does not resume a traced process; a running one was said to be "a build starting, or stopped",
// though a stopped one has its own line. The store's error is stubbed: a real traced process needs
// ptrace rights a test cannot count on.
import { StoreError } from '@splitzip/store';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type * as Store from '@splitzip/store';

let storeError: StoreError | undefined;
vi.mock('@splitzip/store', async (importOriginal) => {
  const original = await importOriginal<typeof Store>();
  return {
    ...original,
    openCacheStore: async (...args: Parameters<typeof original.openCacheStore>) => {
      if (storeError !== undefined) throw storeError;
      return original.openCacheStore(...args);
    },
  };
});

const { openExistingCache } = await import('../src/open-existing-cache.js');

afterEach(() => {
  storeError = undefined;
});

const cache = '/caches/c1';
const holder = { pid: 4242, host: 'node-7', bootId: null, startTicks: null, pidNamespace: null, token: '0123456789abcdef', createdMs: 0 };

function beingCreated(held: { holderStopped: boolean; holderTraced?: boolean; lockTaken?: boolean }): StoreError {
  return new StoreError('NOT_A_CACHE', 'no manifest.json yet: the cache is being created …', {
    path: `${cache}/manifest.json`,
    details: { reason: 'being-created', holder, lockPath: `${cache}/lock`, ...held },
  });
}

async function refusal(): Promise<Error & { code?: string; context?: Record<string, unknown> }> {
  try {
    await openExistingCache(cache, { signal: new AbortController().signal, command: 'verify' });
  } catch (error) {
    return error as Error & { code?: string; context?: Record<string, unknown> };
  }
  throw new Error('opened');
}

describe('CACHE_BEING_CREATED by the holder\'s state', () => {
  it('a traced holder (held by a debugger): continue it in the debugger, or end it; no kill -CONT', async () => {
    storeError = beingCreated({ holderStopped: true, holderTraced: true });
    const error = await refusal();
    expect(error.code).toBe('CACHE_BEING_CREATED');
    expect(error.message).toBe(
      "a cache is being created at /caches/c1 by pid 4242 on node-7, which is held by a debugger (traced) holding the cache's writer lock before writing manifest.json: " +
        'continue it in the debugger, or end it, then run verify again',
    );
    expect(error.context).toMatchObject({ file: cache, holder, holderStopped: true, holderTraced: true });
  });

  it('a stopped holder: kill -CONT or end it, with no word of a debugger', async () => {
    storeError = beingCreated({ holderStopped: true, holderTraced: false });
    const error = await refusal();
    expect(error.message).toBe(
      "a cache is being created at /caches/c1 by pid 4242 on node-7, which is stopped (job control or SIGSTOP) holding the cache's writer lock before writing manifest.json: " +
        'resume it with `kill -CONT 4242` or end it, then run verify again',
    );
    expect(error.context).toMatchObject({ holderStopped: true, holderTraced: false });
  });

  it('a running holder: a build starting, run again once it has written manifest.json; not "or stopped"', async () => {
    storeError = beingCreated({ holderStopped: false });
    const error = await refusal();
    expect(error.message).toBe(
      "a cache is being created at /caches/c1 by pid 4242 on node-7: it holds the cache's writer lock and has not written manifest.json yet (a build starting); run verify again once it has",
    );
    expect(error.context).toMatchObject({ holderStopped: false, holderTraced: false });
  });

  it('a holder still taking the lock (the store named it from its lock attempt: lockTaken false): "is taking", not "holds"', async () => {
    storeError = beingCreated({ holderStopped: false, lockTaken: false });
    const error = await refusal();
    expect(error.message).toBe(
      "a cache is being created at /caches/c1 by pid 4242 on node-7: it is taking the cache's writer lock and has not written manifest.json yet (a build starting); run verify again once it has",
    );
  });
});
