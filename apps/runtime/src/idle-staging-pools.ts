import { whenQuarantinedSlotsBack, type StagingPool } from './create-staging-pool.js';

/** Idle staging pools the process keeps for later loads (each is slotCount × largest payload). */
export const MAX_IDLE_POOLS = 2;
/**
 * Idle pools are dropped this long after the last one was given back or lent. Why keep them at
 * all once a load ended: new memory is slow to touch the first time (a page fault per 4 KiB page,
 * ~3 ms per MiB on this project's VMs), and a loader that opens a fresh cache handle per load
 * (a CLI, a server reloading a model) would otherwise fault in its whole staging again each time.
 */
export const IDLE_POOL_RELEASE_MS = 10_000;

interface IdlePool {
  pool: StagingPool;
  shared: boolean;
}

/** Most recently given back first: process-wide, shared by every cache handle. */
const idlePools: IdlePool[] = [];
let releaseTimer: ReturnType<typeof setTimeout> | undefined;

function scheduleRelease(): void {
  if (releaseTimer !== undefined) clearTimeout(releaseTimer);
  releaseTimer = idlePools.length === 0 ? undefined : setTimeout(releaseIdleStagingPools, IDLE_POOL_RELEASE_MS);
  // Idle memory must never keep the process alive.
  releaseTimer?.unref?.();
}

/**
 * Takes an idle pool whose slots are big and many enough, with the same sharing and (for threads)
 * scratch for as many decode threads; undefined when none fits.
 */
export function takeIdleStagingPool(request: { slotBytes: number; slotCount: number; shared: boolean; threads: number }): StagingPool | undefined {
  const { slotBytes, slotCount, shared, threads } = request;
  const index = idlePools.findIndex(
    (idle) =>
      idle.shared === shared &&
      idle.pool.slotBytes >= slotBytes &&
      idle.pool.slotCount >= slotCount &&
      (threads === 0 || idle.pool.arena === undefined || idle.pool.arena.threads >= threads),
  );
  if (index < 0) return undefined;
  const [taken] = idlePools.splice(index, 1);
  scheduleRelease();
  return taken?.pool;
}

/**
 * Keeps a pool with no slot out for later loads; the oldest beyond MAX_IDLE_POOLS is closed. A pool
 * whose only slots out are quarantined (an aborted load left a read or decode behind, e.g. the
 * 'workers' backend's threads still reading a payload) is kept once they are all back, not before:
 * lent earlier, it would serve its loads with fewer slots, and those slots come back through
 * `release` anyway. A slot out for any other reason: never lent again.
 */
export function keepIdleStagingPool(pool: StagingPool, shared: boolean): void {
  const { inUse, quarantinedSlots } = pool.stats();
  if (inUse !== 0) {
    const back = inUse === quarantinedSlots ? whenQuarantinedSlotsBack(pool) : undefined;
    // Nothing else holds this pool meanwhile (its borrower gave it back): once back, inUse is 0.
    if (back !== undefined) void back.then(() => keepIdleStagingPool(pool, shared));
    return;
  }
  idlePools.unshift({ pool, shared });
  for (const dropped of idlePools.splice(MAX_IDLE_POOLS)) dropped.pool.close();
  scheduleRelease();
}

/** Drops every idle staging pool now (their memory goes with the next garbage collection); returns how many. */
export function releaseIdleStagingPools(): number {
  const dropped = idlePools.splice(0);
  for (const idle of dropped) idle.pool.close();
  scheduleRelease();
  return dropped.length;
}
