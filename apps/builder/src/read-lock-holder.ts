// Who holds a directory cache's writer lock, read from its lock file, for the CLI to name a writer
// it waits on: the store decides who holds the lock and waits for it silently; these messages only
// say what the file says. The record is the store's documented one (its README, "Concurrency
// mechanism": `{pid, host, bootId, startTicks, token, createdMs}`); anything else reads as unknown.
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { isHolderDead, MAX_LOCK_FILE_BYTES } from '@splitzip/store';

/** The writer lock's file in a cache directory (the store's `<root>/lock`). */
export const LOCK_FILE_NAME = 'lock';

export interface LockHolderInfo {
  pid: number;
  host: string;
  /** Names this holding of the lock: a new one for every time it is taken. */
  token: string;
  /** The holder's boot and process start, as the store records them (null where it could not). */
  bootId: string | null;
  startTicks: number | null;
  pidNamespace: string | null;
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
    const record = JSON.parse(bytes.toString('utf8', 0, bytesRead)) as { pid?: unknown; host?: unknown; token?: unknown; bootId?: unknown; startTicks?: unknown; pidNamespace?: unknown };
    if (!(Number.isSafeInteger(record.pid) && (record.pid as number) > 0 && typeof record.host === 'string' && typeof record.token === 'string')) return undefined;
    return {
      pid: record.pid as number,
      host: record.host,
      token: record.token,
      bootId: typeof record.bootId === 'string' ? record.bootId : null,
      startTicks: Number.isSafeInteger(record.startTicks) ? (record.startTicks as number) : null,
      pidNamespace: typeof record.pidNamespace === 'string' ? record.pidNamespace : null,
    };
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
 * True when the holder is certainly not running, as the store judges it (isHolderDead): of this
 * host, and another boot, no such pid, a zombie, or a pid now another process's (a later start).
 * A pid alone misjudged a build killed before a reboot, or one that ran as pid 1 in a container:
 * its pid now names another live process, and verify, inspect and gc said "being created" for
 * ever. Another host's holder cannot be judged from here (false).
 */
export function isHolderGone(holder: LockHolderInfo): boolean {
  return isHolderDead(holder);
}

/** `pid 1234`, with the host where it is not this one's. */
export function describeHolder(holder: Pick<LockHolderInfo, 'pid' | 'host'>): string {
  return holder.host === hostname() ? `pid ${holder.pid}` : `pid ${holder.pid} on ${holder.host}`;
}
