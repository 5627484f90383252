import { argumentTypeError } from './argument-type-error.js';
import { SplitZipError } from './errors.js';
import { isUint8Array } from './typed-array-kind.js';

// XXH32 primes (xxHash spec).
const P1 = 0x9e3779b1;
const P2 = 0x85ebca77;
const P3 = 0xc2b2ae3d;
const P4 = 0x27d4eb2f;
const P5 = 0x165667b1;

/**
 * Streaming XXH32 state for the checksum, which hashes a payload in pieces (the header with
 * its checksum field zeroed, then the rest). Every `update` but the last must be a multiple of 16 bytes.
 */
export class Xxh32State {
  private v1: number;
  private v2: number;
  private v3: number;
  private v4: number;
  private readonly seed: number;
  private totalBytes = 0;
  private tail: Uint8Array | null = null;

  constructor(seed = 0) {
    this.seed = seed >>> 0;
    this.v1 = (this.seed + P1 + P2) | 0;
    this.v2 = (this.seed + P2) | 0;
    this.v3 = this.seed | 0;
    this.v4 = (this.seed - P1) | 0;
  }

  /** Hashes the whole 16-byte stripes of bytes[start, end); the remainder becomes the tail (last call only). */
  update(bytes: Uint8Array, start = 0, end = bytes.length): void {
    if (this.tail !== null) throw new Error('Xxh32State: update after a partial stripe');
    const stripeCount = Math.floor((end - start) / 16); // not >>> 4: lengths may exceed 2^32
    let v1 = this.v1;
    let v2 = this.v2;
    let v3 = this.v3;
    let v4 = this.v4;
    let p = start;
    const stop = start + stripeCount * 16;
    // Aligned fast path through a Uint32Array view (little-endian hosts only).
    // (Not for zero stripes: a view of a detached buffer, length 0, cannot even be constructed.)
    if (LITTLE_ENDIAN && stripeCount > 0 && ((bytes.byteOffset + p) & 3) === 0) {
      const words = new Uint32Array(bytes.buffer, bytes.byteOffset + p, stripeCount * 4);
      const wn = words.length;
      for (let w = 0; w < wn; w += 4) {
        v1 = Math.imul(rotl(v1 + Math.imul(words[w]!, P2), 13), P1);
        v2 = Math.imul(rotl(v2 + Math.imul(words[w + 1]!, P2), 13), P1);
        v3 = Math.imul(rotl(v3 + Math.imul(words[w + 2]!, P2), 13), P1);
        v4 = Math.imul(rotl(v4 + Math.imul(words[w + 3]!, P2), 13), P1);
      }
      p = stop;
    } else {
      for (; p < stop; p += 16) {
        v1 = Math.imul(rotl(v1 + Math.imul(readU32(bytes, p), P2), 13), P1);
        v2 = Math.imul(rotl(v2 + Math.imul(readU32(bytes, p + 4), P2), 13), P1);
        v3 = Math.imul(rotl(v3 + Math.imul(readU32(bytes, p + 8), P2), 13), P1);
        v4 = Math.imul(rotl(v4 + Math.imul(readU32(bytes, p + 12), P2), 13), P1);
      }
    }
    this.v1 = v1;
    this.v2 = v2;
    this.v3 = v3;
    this.v4 = v4;
    this.totalBytes += stop - start;
    if (stop < end) {
      // A copy (a Buffer's `slice` is a view): the caller may refill `bytes` before the next update.
      this.tail = new Uint8Array(bytes.subarray(stop, end));
      this.totalBytes += end - stop;
    }
  }

  /**
   * Hashes the 16-byte stripes that start at `start`, `start + step`, … and end by `end`, as if they
   * were contiguous (the formats' stripe streams: step 16 x ways). Whole stripes only.
   */
  updateStripes(bytes: Uint8Array, start: number, end: number, step: number): void {
    if (this.tail !== null) throw new Error('Xxh32State: update after a partial stripe');
    let v1 = this.v1;
    let v2 = this.v2;
    let v3 = this.v3;
    let v4 = this.v4;
    let p = start;
    const count = p + 16 <= end ? Math.floor((end - 16 - p) / step) + 1 : 0;
    if (LITTLE_ENDIAN && count > 0 && ((bytes.byteOffset + p) & 3) === 0 && (step & 3) === 0) {
      // Aligned fast path through a Uint32Array view (little-endian hosts only).
      const words = new Uint32Array(bytes.buffer, bytes.byteOffset + p, ((count - 1) * step + 16) / 4);
      const ws = step / 4;
      const wn = count * ws;
      for (let w = 0; w < wn; w += ws) {
        v1 = Math.imul(rotl(v1 + Math.imul(words[w]!, P2), 13), P1);
        v2 = Math.imul(rotl(v2 + Math.imul(words[w + 1]!, P2), 13), P1);
        v3 = Math.imul(rotl(v3 + Math.imul(words[w + 2]!, P2), 13), P1);
        v4 = Math.imul(rotl(v4 + Math.imul(words[w + 3]!, P2), 13), P1);
      }
    } else {
      for (let k = 0; k < count; k++, p += step) {
        v1 = Math.imul(rotl(v1 + Math.imul(readU32(bytes, p), P2), 13), P1);
        v2 = Math.imul(rotl(v2 + Math.imul(readU32(bytes, p + 4), P2), 13), P1);
        v3 = Math.imul(rotl(v3 + Math.imul(readU32(bytes, p + 8), P2), 13), P1);
        v4 = Math.imul(rotl(v4 + Math.imul(readU32(bytes, p + 12), P2), 13), P1);
      }
    }
    this.totalBytes += 16 * count;
    this.v1 = v1;
    this.v2 = v2;
    this.v3 = v3;
    this.v4 = v4;
  }

  /** Lane state after whole stripes, for kernels that continue the stripe loop elsewhere. */
  getLanes(): [number, number, number, number] {
    return [this.v1, this.v2, this.v3, this.v4];
  }

  setLanes(v1: number, v2: number, v3: number, v4: number, addedBytes: number): void {
    this.v1 = v1 | 0;
    this.v2 = v2 | 0;
    this.v3 = v3 | 0;
    this.v4 = v4 | 0;
    this.totalBytes += addedBytes;
  }

  digest(): number {
    let h: number;
    if (this.totalBytes >= 16) {
      h = (rotl(this.v1, 1) + rotl(this.v2, 7) + rotl(this.v3, 12) + rotl(this.v4, 18)) | 0;
    } else {
      h = (this.seed + P5) | 0;
    }
    h = (h + (this.totalBytes % 0x100000000)) | 0; // the spec adds the length modulo 2^32
    const tail = this.tail ?? new Uint8Array(0);
    let p = 0;
    for (; p + 4 <= tail.length; p += 4) {
      h = Math.imul(rotl(h + Math.imul(readU32(tail, p), P3), 17), P4);
    }
    for (; p < tail.length; p++) {
      h = Math.imul(rotl(h + Math.imul(tail[p]!, P5), 11), P1);
    }
    h ^= h >>> 15;
    h = Math.imul(h, P2);
    h ^= h >>> 13;
    h = Math.imul(h, P3);
    h ^= h >>> 16;
    return h >>> 0;
  }
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function readU32(bytes: Uint8Array, p: number): number {
  return (bytes[p]! | (bytes[p + 1]! << 8) | (bytes[p + 2]! << 16) | (bytes[p + 3]! << 24)) >>> 0;
}

/** XXH32 of `bytes` (seed 0 unless given), as an unsigned 32-bit number. */
export function xxh32(bytes: Uint8Array, seed = 0): number {
  if (!isUint8Array(bytes)) {
    throw argumentTypeError('bytes', 'a Uint8Array', bytes);
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new SplitZipError('INVALID_ARGUMENT', 'xxh32 seed must be an integer in 0..2^32-1', { seed });
  }
  const state = new Xxh32State(seed);
  state.update(bytes);
  return state.digest();
}
