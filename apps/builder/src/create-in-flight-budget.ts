// The build's memory budget: bytes reserved by the tensors in flight (raw bytes plus payload). A
// tensor reserves its worst case when admitted, so admitted work never waits for memory (no
// deadlock); it gives bytes back as soon as it no longer holds them (the raw bytes once encoded),
// which lets the next tensor be read while this one's payload is still being written.

export interface InFlightBudget {
  /** Bytes reserved now. */
  readonly usedBytes: number;
  /** True when `bytes` more fit (always true when nothing is reserved, so one tensor can pass). */
  fits(bytes: number): boolean;
  /** Reserves `bytes`; returns the reservation, which gives its bytes back in parts or at once. */
  reserve(bytes: number): Reservation;
  /** Resolves at the next give-back (or at once when one happened since the last call). */
  changed(): Promise<void>;
}

export interface Reservation {
  /** Keeps only `bytes` of the reservation (never grows it). */
  shrinkTo(bytes: number): void;
  /** Gives everything back. Idempotent. */
  release(): void;
}

export function createInFlightBudget(capBytes: number): InFlightBudget {
  let usedBytes = 0;
  let wake: (() => void) | null = null;
  let pending = false;
  const giveBack = (bytes: number): void => {
    if (bytes <= 0) return;
    usedBytes -= bytes;
    if (wake) {
      wake();
      wake = null;
    } else pending = true;
  };
  return {
    get usedBytes() {
      return usedBytes;
    },
    fits(bytes) {
      return usedBytes === 0 || usedBytes + bytes <= capBytes;
    },
    reserve(bytes) {
      let held = bytes;
      usedBytes += bytes;
      return {
        shrinkTo(keepBytes) {
          const keep = Math.max(0, Math.min(held, keepBytes));
          giveBack(held - keep);
          held = keep;
        },
        release() {
          giveBack(held);
          held = 0;
        },
      };
    },
    changed() {
      if (pending) {
        pending = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        const previous = wake;
        wake = () => {
          previous?.();
          resolve();
        };
      });
    },
  };
}
