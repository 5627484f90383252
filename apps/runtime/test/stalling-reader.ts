// A ByteReader for abort tests: its reads stall until `unstall()`, ignoring the signal they are
// given (a hung network mount, a remote adapter on a dead connection), and it records each read's
// signal and how many are in flight. `readFirst` runs before each read and may throw to fail it or
// return true to read without stalling.
import { expect } from 'vitest';
import { createFileReader, type ByteReader, type ByteReadOptions } from '../src/create-file-reader.js';
import type { StagingPool } from '../src/create-staging-pool.js';

export interface StallingReader {
  reader: ByteReader;
  /** The signal each read was given, in call order. */
  signals: unknown[];
  inFlight(): number;
  /** Lets every stalled read go on (each then reads its bytes). */
  unstall(): void;
}

export function createStallingReader(readFirst?: (path: string, positionBytes: number) => Promise<boolean | void>): StallingReader {
  const inner = createFileReader();
  const gates: (() => void)[] = [];
  const signals: unknown[] = [];
  let inFlight = 0;
  const reader: ByteReader = {
    async readExact(path: string, target: Uint8Array, positionBytes: number, options?: ByteReadOptions) {
      signals.push(options?.signal);
      if ((await readFirst?.(path, positionBytes)) === true) return inner.readExact(path, target, positionBytes);
      inFlight += 1;
      try {
        await new Promise<void>((resolve) => gates.push(resolve));
        await inner.readExact(path, target, positionBytes);
      } finally {
        inFlight -= 1;
      }
    },
    close: () => inner.close(),
  };
  return { reader, signals, inFlight: () => inFlight, unstall: () => gates.splice(0).forEach((open) => open()) };
}

/**
 * After the load's abort: the one slot of `pool` a stalled read may still write into stays out of
 * the pool, counted in its stats (why a load waiting for a slot waits), until `unstall()`; then the
 * read ends and the slot comes back.
 */
export async function expectSlotHeldUntilUnstalled(pool: StagingPool, stalled: StallingReader): Promise<void> {
  expect(pool.tryAcquire()).toBeUndefined();
  expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 1 });
  stalled.unstall();
  const slot = await pool.acquire();
  expect(stalled.inFlight()).toBe(0);
  expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 0 });
  pool.release(slot);
}
