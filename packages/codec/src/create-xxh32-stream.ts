import { argumentTypeError } from './argument-type-error.js';
import { SplitZipError } from './errors.js';
import { isUint8Array } from './typed-array-kind.js';
import { Xxh32State } from './xxh32.js';

/** A running XXH32: `update` with pieces of any length, in order, then `digest` once. */
export interface Xxh32Stream {
  update(bytes: Uint8Array): void;
  /** The XXH32 of every byte given; the stream takes no more after it. */
  digest(): number;
}

/**
 * XXH32 (as `xxh32`, same seed rule) of bytes fed in pieces of any length: for a span too large to
 * hold whole (the store verifies a large payload's escape sections as it reads them). Whole 16-byte
 * stripes go straight to the checksum's own state; a piece's partial stripe waits in 16 bytes.
 */
export function createXxh32Stream(seed = 0): Xxh32Stream {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new SplitZipError('INVALID_ARGUMENT', 'seed must be an integer in 0..2^32-1', { seed });
  }
  const state = new Xxh32State(seed);
  // The bytes of a stripe not yet complete (fewer than 16).
  const pending = new Uint8Array(16);
  let pendingBytes = 0;
  let done = false;
  return {
    update(bytes: Uint8Array): void {
      if (!isUint8Array(bytes)) throw argumentTypeError('bytes', 'a Uint8Array', bytes);
      if (done) throw new SplitZipError('INVALID_ARGUMENT', 'update after digest', {});
      let p = 0;
      if (pendingBytes > 0) {
        p = Math.min(16 - pendingBytes, bytes.length);
        pending.set(bytes.subarray(0, p), pendingBytes);
        pendingBytes += p;
        if (pendingBytes < 16) return;
        state.update(pending);
        pendingBytes = 0;
      }
      const stop = p + Math.floor((bytes.length - p) / 16) * 16;
      if (stop > p) state.update(bytes, p, stop);
      pending.set(bytes.subarray(stop), 0);
      pendingBytes = bytes.length - stop;
    },
    digest(): number {
      if (done) throw new SplitZipError('INVALID_ARGUMENT', 'digest called twice', {});
      done = true;
      if (pendingBytes > 0) state.update(pending, 0, pendingBytes);
      return state.digest();
    },
  };
}
