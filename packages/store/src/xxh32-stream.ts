// XXH32 (seed 0) of a byte span fed in pieces: verify hashes a large payload's escape sections
// (each checksum digest spans a whole section: FORMAT.md "Checksum") without holding one whole.
// The codec's own streaming state is internal; its one-shot `xxh32` checks this one (tests).

const P1 = 0x9e3779b1;
const P2 = 0x85ebca77;
const P3 = 0xc2b2ae3d;
const P4 = 0x27d4eb2f;
const P5 = 0x165667b1;

const rotl = (x: number, r: number): number => (x << r) | (x >>> (32 - r));
const readU32 = (b: Uint8Array, p: number): number => (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;

/** A running XXH32 (seed 0): `update` with pieces of any length, in order, then `digest` once. */
export class Xxh32Stream {
  private v1 = (P1 + P2) | 0;
  private v2 = P2 | 0;
  private v3 = 0;
  private v4 = -P1 | 0;
  private totalBytes = 0;
  /** Bytes of a stripe not yet complete (fewer than 16). */
  private readonly pending = new Uint8Array(16);
  private pendingBytes = 0;

  update(bytes: Uint8Array): void {
    this.totalBytes += bytes.length;
    let p = 0;
    if (this.pendingBytes > 0) {
      const take = Math.min(16 - this.pendingBytes, bytes.length);
      this.pending.set(bytes.subarray(0, take), this.pendingBytes);
      this.pendingBytes += take;
      p = take;
      if (this.pendingBytes < 16) return;
      this.stripes(this.pending, 0, 16);
      this.pendingBytes = 0;
    }
    const stop = p + Math.floor((bytes.length - p) / 16) * 16;
    this.stripes(bytes, p, stop);
    this.pending.set(bytes.subarray(stop), 0);
    this.pendingBytes = bytes.length - stop;
  }

  private stripes(bytes: Uint8Array, start: number, stop: number): void {
    let { v1, v2, v3, v4 } = this;
    for (let p = start; p < stop; p += 16) {
      v1 = Math.imul(rotl(v1 + Math.imul(readU32(bytes, p), P2), 13), P1);
      v2 = Math.imul(rotl(v2 + Math.imul(readU32(bytes, p + 4), P2), 13), P1);
      v3 = Math.imul(rotl(v3 + Math.imul(readU32(bytes, p + 8), P2), 13), P1);
      v4 = Math.imul(rotl(v4 + Math.imul(readU32(bytes, p + 12), P2), 13), P1);
    }
    this.v1 = v1;
    this.v2 = v2;
    this.v3 = v3;
    this.v4 = v4;
  }

  digest(): number {
    let h = this.totalBytes >= 16 ? (rotl(this.v1, 1) + rotl(this.v2, 7) + rotl(this.v3, 12) + rotl(this.v4, 18)) | 0 : P5 | 0;
    h = (h + (this.totalBytes % 0x100000000)) | 0; // the spec adds the length modulo 2^32
    const tail = this.pending.subarray(0, this.pendingBytes);
    let p = 0;
    for (; p + 4 <= tail.length; p += 4) h = Math.imul(rotl(h + Math.imul(readU32(tail, p), P3), 17), P4);
    for (; p < tail.length; p++) h = Math.imul(rotl(h + Math.imul(tail[p]!, P5), 11), P1);
    h ^= h >>> 15;
    h = Math.imul(h, P2);
    h ^= h >>> 13;
    h = Math.imul(h, P3);
    h ^= h >>> 16;
    return h >>> 0;
  }
}
