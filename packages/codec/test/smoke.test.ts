import { describe, expect, it } from 'vitest';
import { calibrateCodebook, decode, decodeRange, encode, readPayloadMeta, xxh32 } from '../src/index.js';
import { gaussianBf16, randomBf16, referenceDecode, referenceEncode, referenceXxh32 } from './reference.js';

describe('smoke', () => {
  it('xxh32 known vectors', () => {
    expect(referenceXxh32(new Uint8Array(0))).toBe(0x02cc5d05);
    expect(referenceXxh32(new TextEncoder().encode('abc'))).toBe(0x32d153ff);
    expect(xxh32(new Uint8Array(0))).toBe(0x02cc5d05);
    expect(xxh32(new TextEncoder().encode('abc'))).toBe(0x32d153ff);
  });
  it('round trips gaussian and random data bit-exact against the reference', () => {
    for (const values of [gaussianBf16(10_001, 0.02, 1), randomBf16(3001, 2)]) {
      const { codebook } = calibrateCodebook(values);
      const payload = encode(values, codebook);
      expect(payload).toEqual(referenceEncode(values, codebook.exponents));
      expect(referenceDecode(payload)).toEqual(values);
      expect(decode(payload)).toEqual(values);
      expect(decodeRange(payload, 17, 2500)).toEqual(values.subarray(17, 2517));
      expect(readPayloadMeta(payload).elementCount).toBe(values.length);
    }
  });
});
