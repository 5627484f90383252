import { describe, expect, it } from 'vitest';
import { convertFloat32BytesToBf16, float32BitsToBf16Bits, halfToFloat32Bits } from '../src/index.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const valueOf = (bits: number) => {
  u32[0] = bits >>> 0;
  return f32[0] as number;
};

/**
 * Independent reference: pick the nearer of the two BF16 neighbours by exact double arithmetic; on a
 * tie, the one with an even last mantissa bit. Overflow: past the largest finite BF16, the upper
 * neighbour is 2^128 (as if the exponent were unbounded), which rounds to infinity.
 */
function referenceBf16(bits: number): number {
  const b = bits >>> 0;
  const sign = b >>> 31;
  const magnitude = b & 0x7fffffff;
  if (magnitude > 0x7f800000) return ((b >>> 16) | 0x40) & 0xffff; // NaN: spec'd below separately
  if (magnitude === 0x7f800000) return b >>> 16;
  const x = Math.abs(valueOf(b));
  const lowBits = magnitude >>> 16; // truncation towards zero
  const low = Math.abs(valueOf(lowBits << 16));
  const highBits = lowBits + 1;
  const high = highBits === 0x7f80 ? 2 ** 128 : Math.abs(valueOf(highBits << 16));
  const dLow = x - low;
  const dHigh = high - x;
  const chosen = dLow < dHigh ? lowBits : dHigh < dLow ? highBits : (lowBits & 1) === 0 ? lowBits : highBits;
  return ((sign << 15) | chosen) & 0xffff;
}

describe('float32 -> BF16, round to nearest even', () => {
  it('named cases', () => {
    const cases: [number, number, string][] = [
      [0x00000000, 0x0000, '+0'],
      [0x80000000, 0x8000, '-0'],
      [0x3f800000, 0x3f80, '1.0'],
      [0x3f808000, 0x3f80, 'tie, even below: stays'],
      [0x3f818000, 0x3f82, 'tie, odd below: rounds up'],
      [0x3f808001, 0x3f81, 'just above the tie: up'],
      [0x3f807fff, 0x3f80, 'just below the tie: down'],
      [0xbf818000, 0xbf82, 'negative tie to even (away from zero here)'],
      [0x7f7fffff, 0x7f80, 'largest float32 overflows to +inf'],
      [0xff7fffff, 0xff80, '... and to -inf'],
      [0x7f7f7fff, 0x7f7f, 'largest value that stays the largest finite BF16'],
      [0x7f7f8000, 0x7f80, 'tie above the largest finite BF16 (odd) rounds to inf'],
      [0x7f7f0000, 0x7f7f, 'largest finite BF16 exactly'],
      [0x7f800000, 0x7f80, '+inf'],
      [0xff800000, 0xff80, '-inf'],
      [0x00000001, 0x0000, 'smallest subnormal rounds to +0'],
      [0x80000001, 0x8000, '... and to -0'],
      [0x00008000, 0x0000, 'subnormal tie to even: zero'],
      [0x00018000, 0x0002, 'subnormal tie to even: up'],
      [0x00010000, 0x0001, 'smallest BF16 subnormal exactly'],
      [0x007fffff, 0x0080, 'largest subnormal rounds up into the normals'],
      [0x00800000, 0x0080, 'smallest normal'],
      [0x7fc00000, 0x7fc0, 'canonical quiet NaN'],
      [0xffc00000, 0xffc0, 'negative quiet NaN keeps its sign'],
      [0x7f800001, 0x7fc0, 'signalling NaN with a low payload: quiet, not inf'],
      [0x7fa00000, 0x7fe0, 'signalling NaN with a high payload: kept, quiet bit set'],
      [0xff812345, 0xffc1, 'negative signalling NaN: sign and top payload kept'],
      [0x7fffffff, 0x7fff, 'NaN with all payload bits: no carry into the sign'],
    ];
    for (const [input, expected, name] of cases) {
      expect(float32BitsToBf16Bits(input).toString(16), name).toBe(expected.toString(16));
      expect(referenceBf16(input).toString(16), `reference: ${name}`).toBe(expected.toString(16));
    }
  });

  it('matches the reference on every upper half with every tie-relevant lower half (all 65,536 x 8)', () => {
    const lows = [0x0000, 0x0001, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff];
    let ties = 0;
    for (let high = 0; high < 0x10000; high++) {
      for (const low of lows) {
        const bits = ((high << 16) | low) >>> 0;
        const actual = float32BitsToBf16Bits(bits);
        if ((bits & 0x7fffffff) > 0x7f800000) {
          // NaN: still NaN, quiet bit set, sign and top 7 payload bits kept.
          expect((actual & 0x7f80) === 0x7f80 && (actual & 0x7f) !== 0).toBe(true);
          expect(actual & 0x40).toBe(0x40);
          expect(actual & 0x803f).toBe((bits >>> 16) & 0x803f);
          continue;
        }
        const expected = referenceBf16(bits);
        if (actual !== expected) expect(`${bits.toString(16)} -> ${actual.toString(16)}`).toBe(`${bits.toString(16)} -> ${expected.toString(16)}`);
        if (low === 0x8000) ties++;
      }
    }
    expect(ties).toBe(65536 - 2 * 0x80); // every upper half but the 2 x 128 whose tie pattern is a NaN
  });

  it('matches the reference on 1,000,000 random patterns, and the bulk converter matches the scalar one', () => {
    let s = 12345;
    const n = 1_000_000;
    const bytes = new Uint8Array(n * 4 + 1);
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < n; i++) {
      s ^= s << 13;
      s ^= s >>> 17;
      s ^= s << 5;
      view.setUint32(1 + i * 4, s >>> 0, true);
    }
    // Unaligned source (offset 1) and unaligned destination exercise the copy paths.
    const source = bytes.subarray(1);
    const out = new Uint8Array(n * 2 + 1);
    const converted = convertFloat32BytesToBf16(source, out.subarray(1));
    const convertedAligned = convertFloat32BytesToBf16(source.slice());
    for (let i = 0; i < n; i++) {
      const bits = view.getUint32(1 + i * 4, true);
      const scalar = float32BitsToBf16Bits(bits);
      const bulk = (converted[2 * i] as number) | ((converted[2 * i + 1] as number) << 8);
      const bulkAligned = (convertedAligned[2 * i] as number) | ((convertedAligned[2 * i + 1] as number) << 8);
      if (bulk !== scalar || bulkAligned !== scalar) throw new Error(`bulk mismatch at ${bits.toString(16)}`);
      if ((bits & 0x7fffffff) <= 0x7f800000 && scalar !== referenceBf16(bits)) throw new Error(`reference mismatch at ${bits.toString(16)}`);
    }
    expect(convertFloat32BytesToBf16(new Uint8Array(0))).toHaveLength(0);
    expect(() => convertFloat32BytesToBf16(new Uint8Array(6))).toThrow(/multiple of 4/);
  });
});

describe('IEEE half -> float32 (tfjs float16 dequantization)', () => {
  it('is exact for all 65,536 halves', () => {
    for (let h = 0; h < 0x10000; h++) {
      const sign = h & 0x8000 ? -1 : 1;
      const e = (h >>> 10) & 0x1f;
      const m = h & 0x3ff;
      const bits = halfToFloat32Bits(h);
      if (e === 0x1f && m !== 0) {
        expect(Number.isNaN(valueOf(bits))).toBe(true);
        expect(bits >>> 31).toBe(h >>> 15);
        continue;
      }
      const expected = e === 0x1f ? sign * Infinity : e === 0 ? sign * m * 2 ** -24 : sign * (1 + m / 1024) * 2 ** (e - 15);
      expect(Object.is(valueOf(bits), expected), `half ${h.toString(16)}`).toBe(true);
    }
  });
});
