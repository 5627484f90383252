// bf16FromFloat32 / float32FromBf16 against scalar oracles written independently of them: every
// BF16 pattern, and float32 bit patterns chosen for the rounding edge cases (ties, subnormals,
// the largest finite values, signalling NaNs) plus seeded random ones.
import { describe, expect, it } from 'vitest';
import { bf16FromFloat32, float32FromBf16, type SplitZipError } from '../src/index.js';

const scratch = new DataView(new ArrayBuffer(4));
const floatOfBits = (bits: number): number => {
  scratch.setUint32(0, bits >>> 0);
  return scratch.getFloat32(0);
};

/** BF16 of a float32 bit pattern by comparing distances to its two BF16 neighbours (ties to even). */
function oracleBf16(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) return sign | 0x7fc0 | ((magnitude >>> 16) & 0x7f); // NaN: quiet, sign kept
  const low = magnitude >>> 16;
  if ((magnitude & 0xffff) === 0) return sign | low;
  const value = floatOfBits(magnitude);
  const lowValue = floatOfBits(low << 16);
  // Past the largest finite BF16 the next value up is 2^128 (where infinity begins for rounding).
  const highValue = low + 1 === 0x7f80 ? 2 ** 128 : floatOfBits((low + 1) << 16);
  const below = value - lowValue;
  const above = highValue - value;
  const chosen = below < above || (below === above && (low & 1) === 0) ? low : low + 1;
  return sign | chosen;
}

function isBf16NaN(pattern: number): boolean {
  return (pattern & 0x7f80) === 0x7f80 && (pattern & 0x7f) !== 0;
}

/** Seeded float32 bit patterns: the edge cases, then random ones (ties among them by construction). */
function edgeAndRandomBits(count: number): Uint32Array {
  const edges = [
    0, 0x80000000, 0x7f800000, 0xff800000, // signed zeros, infinities
    0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, 0x7f7f8001, 0x7f7e8000, // max finite: up to infinity, ties
    0x00000001, 0x80000001, 0x00008000, 0x00018000, 0x007fffff, 0x807fffff, 0x00007fff, // subnormals
    0x3f808000, 0x3f818000, 0x3f80c000, 0x3f807fff, 0xbf808000, 0xbf818000, // ties to even, both signs
    0x7f800001, 0xff800001, 0x7f80ffff, 0x7fa00000, 0x7fc00000, 0xffc00001, 0x7fffffff, // NaNs, signalling ones
  ];
  const bits = new Uint32Array(edges.length + count);
  bits.set(edges);
  let state = 0x9e3779b9;
  const next = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  for (let i = edges.length; i < bits.length; i++) {
    const r = next();
    // A quarter exact ties (low half 0x8000), a quarter subnormals, the rest anything.
    if (i % 4 === 0) bits[i] = (r & 0xffff0000) | 0x8000;
    else if (i % 4 === 1) bits[i] = r & 0x807fffff;
    else bits[i] = r;
  }
  return bits;
}

describe('float32FromBf16', () => {
  it('is exact for all 65,536 BF16 patterns, NaN payloads included', () => {
    const patterns = new Uint16Array(65536).map((_, i) => i);
    const floats = float32FromBf16(patterns);
    const bits = new Uint32Array(floats.buffer);
    for (let p = 0; p < 65536; p++) expect(bits[p]).toBe((p << 16) >>> 0);
  });
  it('writes into out and returns out itself', () => {
    const out = new Float32Array(4).fill(7);
    const result = float32FromBf16(new Uint16Array([0x3f80, 0xc000]), out);
    expect(result).toBe(out);
    expect([...out]).toEqual([1, -2, 7, 7]);
  });
});

describe('bf16FromFloat32', () => {
  it('is the identity after float32FromBf16 for every non-NaN pattern; a NaN stays a NaN of its sign', () => {
    const patterns = new Uint16Array(65536).map((_, i) => i);
    const back = bf16FromFloat32(float32FromBf16(patterns));
    for (let p = 0; p < 65536; p++) {
      if (isBf16NaN(p)) {
        expect(isBf16NaN(back[p]!)).toBe(true);
        expect(back[p]! & 0x8000).toBe(p & 0x8000);
      } else {
        expect(back[p]).toBe(p);
      }
    }
  });
  it('rounds float32s as the oracle does: ties to even, subnormals, max finite up to infinity, NaNs quiet', () => {
    const bits = edgeAndRandomBits(200_000);
    const result = bf16FromFloat32(new Float32Array(bits.buffer));
    for (let i = 0; i < bits.length; i++) {
      if (result[i] !== oracleBf16(bits[i]!)) expect([bits[i]!.toString(16), result[i]!.toString(16)]).toEqual([bits[i]!.toString(16), oracleBf16(bits[i]!).toString(16)]);
    }
    const at = (input: number): number => bf16FromFloat32(new Float32Array(new Uint32Array([input]).buffer))[0]!;
    expect(at(0x7f7fffff)).toBe(0x7f80); // max finite float32 rounds up to +infinity
    expect(at(0xff7fffff)).toBe(0xff80);
    expect(at(0x7f7f7fff)).toBe(0x7f7f); // just under the tie: the largest finite BF16
    expect(at(0x3f808000)).toBe(0x3f80); // tie, even below
    expect(at(0x3f818000)).toBe(0x3f82); // tie, even above
    expect(at(0x80000000)).toBe(0x8000);
    expect(at(0x7f800001)).toBe(0x7fc0); // signalling NaN with its payload in the low bits: not infinity
    expect(at(0xff800001)).toBe(0xffc0);
  });
  it('takes the float32 view where it lies (offset views) and writes into out, returning it', () => {
    const buffer = new Float32Array([9, 1.5, -3, 9]);
    const out = new Uint16Array(3).fill(0xaaaa);
    const result = bf16FromFloat32(buffer.subarray(1, 3), out);
    expect(result).toBe(out);
    expect([...out]).toEqual([0x3fc0, 0xc040, 0xaaaa]);
  });
  it('refuses wrong types and a short out with typed errors showing the value', () => {
    const error = (run: () => unknown): SplitZipError => {
      try {
        run();
      } catch (caught) {
        return caught as SplitZipError;
      }
      throw new Error('no error');
    };
    const wrong = error(() => bf16FromFloat32(new Float64Array(2) as never));
    expect(wrong.code).toBe('INVALID_ARGUMENT');
    expect(wrong.message).toContain('got object [object Float64Array] of length 2');
    expect(error(() => float32FromBf16([1, 2] as never)).message).toContain('got object [object Array] of length 2');
    expect(error(() => bf16FromFloat32(new Float32Array(3), new Uint16Array(2))).code).toBe('OUTPUT_TOO_SMALL');
    expect(error(() => float32FromBf16(new Uint16Array(3), new Float32Array(2))).code).toBe('OUTPUT_TOO_SMALL');
  });
});

/** Every placement of an n-value input and its output in one small buffer, and what went wrong (none expected). */
function placementFailures(
  inputBytesPerValue: number,
  outputBytesPerValue: number,
  run: (buffer: ArrayBufferLike, outBuffer: ArrayBufferLike, valuesAt: number, outAt: number, n: number) => string | undefined,
): string[] {
  const BUFFER_BYTES = 72;
  const failures: string[] = [];
  for (const kind of ['ArrayBuffer', 'SharedArrayBuffer', 'two SharedArrayBuffer objects over one memory'] as const) {
    for (const n of [1, 2, 3, 5, 8]) {
      for (let valuesAt = 0; valuesAt + n * inputBytesPerValue <= BUFFER_BYTES; valuesAt += inputBytesPerValue) {
        for (let outAt = 0; outAt + n * outputBytesPerValue <= BUFFER_BYTES; outAt += outputBytesPerValue) {
          const buffer = kind === 'ArrayBuffer' ? new ArrayBuffer(BUFFER_BYTES) : new SharedArrayBuffer(BUFFER_BYTES);
          // A structured clone of a SharedArrayBuffer is a second object over the same memory.
          const outBuffer = kind === 'two SharedArrayBuffer objects over one memory' ? structuredClone(buffer) : buffer;
          new Uint8Array(buffer).fill(0xa5);
          const wrong = run(buffer, outBuffer, valuesAt, outAt, n);
          if (wrong !== undefined) failures.push(`${kind}, n ${n}, values at byte ${valuesAt}, out at byte ${outAt}: ${wrong}`);
        }
      }
    }
  }
  return failures;
}

// Out sharing bytes with values (the same start: in place) was read after being overwritten:
// float32FromBf16 in place turned [1, 2, 3, 4] into [1, 1, 0, 1]; bf16FromFloat32 into an out
// starting 4 or more bytes after values changed values still to be rounded.
describe('out sharing bytes with values', () => {
  it('float32FromBf16 gives the oracle for every placement of values and out in one buffer (or two SharedArrayBuffer objects over it)', () => {
    const patterns = new Uint16Array(edgeAndRandomBits(64).buffer); // halves of float32 patterns: NaNs, zeros, anything
    const failures = placementFailures(2, 4, (buffer, outBuffer, valuesAt, outAt, n) => {
      const values = new Uint16Array(buffer, valuesAt, n);
      values.set(patterns.subarray(valuesAt + outAt, valuesAt + outAt + n));
      const expected = Array.from(values, (p) => (p << 16) >>> 0);
      const out = new Float32Array(outBuffer, outAt, n);
      if (float32FromBf16(values, out) !== out) return 'out not returned';
      const got = Array.from(new Uint32Array(outBuffer, outAt, n));
      return got.every((bits, i) => bits === expected[i]) ? undefined : `${got.map((b) => b.toString(16)).join()} for ${expected.map((b) => b.toString(16)).join()}`;
    });
    expect(failures).toEqual([]);
    const inPlace = new Uint16Array([0x3f80, 0x4000, 0x4040, 0x4080, 0, 0, 0, 0]);
    expect([...float32FromBf16(inPlace.subarray(0, 4), new Float32Array(inPlace.buffer, 0, 4))]).toEqual([1, 2, 3, 4]);
  });

  it('bf16FromFloat32 gives the oracle for every placement of values and out in one buffer (or two SharedArrayBuffer objects over it)', () => {
    const inputs = edgeAndRandomBits(64);
    const failures = placementFailures(4, 2, (buffer, outBuffer, valuesAt, outAt, n) => {
      const bits = new Uint32Array(buffer, valuesAt, n);
      bits.set(inputs.subarray(valuesAt / 4 + outAt / 2, valuesAt / 4 + outAt / 2 + n));
      const expected = Array.from(bits, (x) => oracleBf16(x));
      const out = new Uint16Array(outBuffer, outAt, n);
      if (bf16FromFloat32(new Float32Array(buffer, valuesAt, n), out) !== out) return 'out not returned';
      const got = Array.from(out);
      return got.every((p, i) => p === expected[i]) ? undefined : `${got.map((p) => p.toString(16)).join()} for ${expected.map((p) => p.toString(16)).join()}`;
    });
    expect(failures).toEqual([]);
  });

  it('a values or out whose buffer was detached is INVALID_ARGUMENT naming it (bf16FromFloat32 threw a TypeError, float32FromBf16 returned an empty array or said OUTPUT_TOO_SMALL)', () => {
    const refusal = (run: () => unknown): SplitZipError => {
      try {
        run();
      } catch (caught) {
        return caught as SplitZipError;
      }
      throw new Error('no error');
    };
    const detached = <T extends { buffer: ArrayBufferLike }>(view: T): T => {
      structuredClone(view.buffer, { transfer: [view.buffer as ArrayBuffer] });
      return view;
    };
    const cases: [string, () => unknown][] = [
      ['values', () => bf16FromFloat32(detached(new Float32Array(4)))],
      ['values', () => float32FromBf16(detached(new Uint16Array(4)))],
      ['out', () => bf16FromFloat32(new Float32Array(2), detached(new Uint16Array(2)))],
      ['out', () => float32FromBf16(new Uint16Array(2), detached(new Float32Array(2)))],
      ['out', () => float32FromBf16(new Uint16Array(0), detached(new Float32Array(2)))],
    ];
    for (const [argument, run] of cases) {
      const error = refusal(run);
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toContain(`${argument} cannot be read`);
      expect(error.details).toMatchObject({ argument });
    }
  });
});
