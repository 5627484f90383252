import { describe, expect, it } from 'vitest';
import {
  computePayloadLayout,
  createCodebook,
  createPayloadWriter,
  encode,
  HEADER_BYTES,
  MAX_ELEMENT_COUNT,
  readPayloadMeta,
  SECTION_ALIGN_BYTES,
  xxh32,
} from '../src/index.js';
import { referenceChecksum, referenceEncode, referenceLayout, valuesWithExponents } from './reference.js';

describe('computePayloadLayout', () => {
  it('matches the layout rule for many (n, escapes, chunk size)', () => {
    for (const n of [0, 1, 2, 255, 256, 511, 512, 513, 1023, 1024, 1025, 100_000, MAX_ELEMENT_COUNT]) {
      for (const chunk of [64, 1024, 65536]) {
        for (const e of [0, Math.min(1, n), Math.floor(n / 3), n]) {
          const L = computePayloadLayout(n, e, chunk);
          const R = referenceLayout(n, e, chunk);
          expect([L.codes.offsetBytes, L.sm.offsetBytes, L.escapeIndex.offsetBytes, L.escapePositions.offsetBytes, L.escapeExponents.offsetBytes, L.totalBytes]).toEqual([
            R.a1,
            R.a2,
            R.a3,
            R.a4,
            R.a5,
            R.total,
          ]);
          expect(L.codes.offsetBytes).toBe(HEADER_BYTES);
          expect(L.totalBytes % SECTION_ALIGN_BYTES).toBe(0);
          expect(L.escapeIndex.byteLength).toBe(4 * (Math.ceil(n / chunk) + 1));
        }
      }
    }
  });

  it('predicts the encoded size', () => {
    const values = valuesWithExponents(3001, [1, 2, 3, 99], 1);
    const payload = encode(values, createCodebook([1, 2, 3]), { chunkSize: 128 });
    const meta = readPayloadMeta(payload);
    expect(computePayloadLayout(3001, meta.escapeCount, 128)).toEqual(meta.layout);
    expect(payload.length).toBe(meta.layout.totalBytes);
    expect(meta.rawBytes).toBe(6002);
  });

  it('rejects bad arguments with INVALID_ARGUMENT', () => {
    expect(() => computePayloadLayout(-1, 0)).toThrow(/INVALID_ARGUMENT/);
    expect(() => computePayloadLayout(MAX_ELEMENT_COUNT + 1, 0)).toThrow(/INVALID_ARGUMENT/);
    expect(() => computePayloadLayout(10, 11)).toThrow(/INVALID_ARGUMENT/);
    expect(() => computePayloadLayout(10, 1, 96)).toThrow(/INVALID_ARGUMENT/);
    expect(() => computePayloadLayout(1.5, 0)).toThrow(/INVALID_ARGUMENT/);
  });
});

describe('createPayloadWriter', () => {
  it('sections filled in place and sealed equal the reference encoding', () => {
    const values = valuesWithExponents(777, [50, 51, 52, 200], 2);
    const exps = [51, 50, 52];
    const chunk = 256;
    const expected = referenceEncode(values, exps, chunk);
    const escapeCount = readPayloadMeta(expected).escapeCount;
    const w = createPayloadWriter(values.length, escapeCount, createCodebook(exps), chunk);
    expect(w.bytes.length).toBe(expected.length);
    expect(w.codes.length).toBe(389);
    expect(w.sm.length).toBe(777);
    expect(w.escapeIndex.length).toBe(5);
    expect(w.escapePositions.length).toBe(escapeCount);
    expect(w.escapeExponents.length).toBe(escapeCount);
    // a GPU encoder would fill these; here a plain loop
    let j = 0;
    for (let i = 0; i < values.length; i++) {
      const v = values[i]!;
      const e = (v >> 7) & 0xff;
      let code = exps.indexOf(e);
      if (i % chunk === 0) w.escapeIndex[i / chunk] = j;
      if (code < 0) {
        code = 0;
        w.escapePositions[j] = i % chunk;
        w.escapeExponents[j++] = e;
      }
      w.codes[i >> 1]! |= i & 1 ? code << 4 : code;
      w.sm[i] = ((v >> 8) & 0x80) | (v & 0x7f);
    }
    w.escapeIndex[4] = j;
    const sealed = w.seal();
    expect(sealed).toBe(w.bytes);
    expect(sealed).toEqual(expected);
    const zeroed = sealed.slice();
    zeroed.fill(0, 252, 256);
    expect(readPayloadMeta(sealed).checksum).toBe(referenceChecksum(sealed));
    expect(referenceChecksum(sealed)).not.toBe(xxh32(zeroed)); // the per-section construction, not a flat hash
  });

  it('rejects bad arguments', () => {
    expect(() => createPayloadWriter(10, 11, createCodebook([1]))).toThrow(/INVALID_ARGUMENT/);
    expect(() => createPayloadWriter(10, 0, { exponents: [] })).toThrow(/INVALID_CODEBOOK/);
  });
});
