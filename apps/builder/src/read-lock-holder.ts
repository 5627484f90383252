// Who holds a directory cache's writer lock, read from its lock file, for the CLI to name a writer
// it waits on: the store decides who holds the lock and waits for it silently; these messages only
// say what the file says. The record is the store's documented one (its README, "Concurrency
// mechanism": `{pid, host, bootId, startTicks, token, createdMs}`); anything else reads as unknown.
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { MAX_LOCK_FILE_BYTES } from '@splitzip/store';

/** The writer lock's file in a cache directory (the store's `<root>/lock`). */
export const LOCK_FILE_NAME = 'lock';

export interface LockHolderInfo {
  pid: number;
  host: string;
  /** Names this holding of the lock: a new one for every time it is taken. */
  token: string;
}

/**
 * The holder the lock file of `cacheDir` names; undefined when there is none, or it cannot be read
 * or parsed (a lock being replaced, a planted FIFO: opened without blocking, then refused).
 */
export async function readLockHolder(cacheDir: string): Promise<LockHolderInfo | undefined> {
  let handle;
  try {
    handle = await open(join(cacheDir, LOCK_FILE_NAME), constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (!(await handle.stat()).isFile()) return undefined;
    const bytes = Buffer.alloc(MAX_LOCK_FILE_BYTES + 1);
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
    if (bytesRead > MAX_LOCK_FILE_BYTES) return undefined;
    const record = JSON.parse(bytes.toString('utf8', 0, bytesRead)) as { pid?: unknown; host?: unknown; token?: unknown };
    if (!(Number.isSafeInteger(record.pid) && (record.pid as number) > 0 && typeof record.host === 'string' && typeof record.token === 'string')) return undefined;
    return { pid: record.pid as number, host: record.host, token: record.token };
  } catch {
    return undefined;
  } finally {
    await handle.close().catch(() => {});
  }
}

/** This very process (its own commit holding the lock). */
export function isThisProcess(holder: LockHolderInfo): boolean {
  return holder.pid === process.pid && holder.host === hostname();
}

/**
 * True when the holder is certainly not running: a process of this host that no longer exists.
 * Another host's holder cannot be judged from here (false).
 */
export function isHolderGone(holder: LockHolderInfo): boolean {
  if (holder.host !== hostname()) return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** `pid 1234`, with the host where it is not this one's. */
export function describeHolder(holder: LockHolderInfo): string {
  return holder.host === hostname() ? `pid ${holder.pid}` : `pid ${holder.pid} on ${holder.host}`;
}
