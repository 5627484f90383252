import { describe, expect, it } from 'vitest';
import { SplitZipError, xxh32 } from '../src/index.js';
import { createRandom, referenceXxh32, scalarXxh32 } from './reference.js';

const text = (s: string): Uint8Array => new TextEncoder().encode(s);

describe('xxh32', () => {
  it('matches the published vectors (checked against the BigInt spec implementation first)', () => {
    expect(referenceXxh32(new Uint8Array(0))).toBe(0x02cc5d05);
    expect(referenceXxh32(text('abc'))).toBe(0x32d153ff);
    expect(xxh32(new Uint8Array(0))).toBe(0x02cc5d05);
    expect(xxh32(text('abc'))).toBe(0x32d153ff);
  });

  it('agrees with the BigInt reference for every length 0..200 and several seeds', () => {
    const rand = createRandom(7);
    const bytes = new Uint8Array(200);
    for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rand() * 256);
    for (const seed of [0, 1, 0x9e3779b1, 0xffffffff]) {
      for (let len = 0; len <= 200; len++) {
        const view = bytes.subarray(0, len);
        const expected = referenceXxh32(view, seed);
        expect(scalarXxh32(view, seed)).toBe(expected);
        expect(xxh32(view, seed)).toBe(expected);
      }
    }
  });

  it('handles unaligned views (odd byteOffset) and a larger buffer', () => {
    const rand = createRandom(8);
    const bytes = new Uint8Array(100_003);
    for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rand() * 256);
    for (const offset of [0, 1, 2, 3]) {
      const view = bytes.subarray(offset);
      expect(xxh32(view)).toBe(scalarXxh32(view));
    }
    expect(xxh32(bytes.subarray(0, 4096))).toBe(referenceXxh32(bytes.subarray(0, 4096)));
  });

  it('rejects bad arguments with INVALID_ARGUMENT', () => {
    expect(() => xxh32([1, 2] as unknown as Uint8Array)).toThrow(SplitZipError);
    expect(() => xxh32(new Uint8Array(1), -1)).toThrow(/INVALID_ARGUMENT/);
    expect(() => xxh32(new Uint8Array(1), 2 ** 32)).toThrow(/INVALID_ARGUMENT/);
  });
});
