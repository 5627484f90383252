// Containers that share a host name (--network=host) and a cache directory, each in its own pid
// namespace: a live writer's pid in one is no process in the other, so its lock read as a dead
// holder's there, was broken, and two writers appended to one journal at once. A holder of
// another pid namespace is now judged as another host's: never broken automatically.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { UNPARSEABLE_LOCK_STALE_MS } from '../src/limits.js';
import { currentBootId, currentPidNamespace, describeThisProcess, isHolderDead } from '../src/write-lock.js';
import { catchError, makeCache, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterAll(removeTempDirs);

/** A pid no process of this namespace has (one that just exited). */
const deadPid = (): number => spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;

it.runIf(existsSync('/proc/self/ns/pid'))('a lock whose holder is in another pid namespace is not broken; one of ours with a dead pid is', async () => {
  const ours = currentPidNamespace()!;
  const pid = deadPid();
  const holder = (pidNamespace: string | null) => ({ pid, host: hostname(), bootId: currentBootId(), startTicks: null, pidNamespace });
  expect(isHolderDead(holder(ours))).toBe(true);
  expect(isHolderDead(holder(null))).toBe(true); // a record from before the field: as before
  expect(isHolderDead(holder('pid:[1]'))).toBe(false);

  const { root } = await makeCache();
  const lock = JSON.stringify({ ...holder('pid:[1]'), token: 'abababababababab', createdMs: Date.now() });
  await writeFile(join(root, 'lock'), lock);
  const store = await openCacheStore(root, { lockTimeoutMs: 300, compactOnClose: false });
  try {
    const error = await catchError(() => store.addEntry(toInput(makeTensor([4, 4], 9501), 'w')));
    expect(error.code).toBe('LOCK_TIMEOUT');
    expect(error.message).toMatch(/another pid namespace/);
    expect(await readFile(join(root, 'lock'), 'utf8')).toBe(lock);
    // The same record in our namespace is a dead holder's, recovered at once.
    await writeFile(join(root, 'lock'), JSON.stringify({ ...holder(ours), token: 'cdcdcdcdcdcdcdcd', createdMs: Date.now() }));
    expect((await store.addEntry(toInput(makeTensor([4, 4], 9502), 'w2'))).added).toBe(true);
  } finally {
    await store.close();
  }
});

it('a lock whose pid namespace is not of the form the store writes (a flipped bit) is unparseable, taken over once old enough, not a foreign holder\'s forever', async () => {
  const { root } = await makeCache();
  const lock = JSON.stringify({ pid: deadPid(), host: hostname(), bootId: currentBootId(), startTicks: null, pidNamespace: 'pid:[402653183&]', token: 'efefefefefefefef', createdMs: Date.now() });
  const path = join(root, 'lock');
  await writeFile(path, lock);
  const old = new Date(Date.now() - 2 * UNPARSEABLE_LOCK_STALE_MS);
  await utimes(path, old, old);
  const store = await openCacheStore(root, { lockTimeoutMs: 2000, compactOnClose: false });
  try {
    expect((await store.addEntry(toInput(makeTensor([4, 4], 9503), 'w3'))).added).toBe(true);
  } finally {
    await store.close();
  }
});

it('this process records its pid namespace in the locks it takes', () => {
  // tryCreateLock writes describeThisProcess() into the lock file.
  expect(describeThisProcess().pidNamespace).toBe(currentPidNamespace());
});
