import { afterAll, describe, expect, it } from 'vitest';
import {
  calibrateCodebook,
  createCodebook,
  decode,
  decodeChunks,
  decodeRange,
  encode,
  getCodecBackend,
  readPayloadMeta,
  setCodecBackend,
  SplitZipError,
  type Codebook,
} from '../src/index.js';
import { BACKENDS, useBackend } from './backends.js';
import {
  allBf16Patterns,
  createRandom,
  gaussianBf16,
  randomBf16,
  referenceDecode,
  referenceEncode,
  valuesWithExponents,
} from './reference.js';

/** Encode with the fast path, compare bytes with the reference encoder, decode both ways. */
function checkRoundTrip(values: Uint16Array, codebook: Codebook, chunkSize = 1024): Uint8Array {
  const payload = encode(values, codebook, { chunkSize });
  const expected = referenceEncode(values, codebook.exponents, chunkSize);
  if (!bytesEqual(payload, expected)) {
    expect.fail(`encoded bytes differ from the reference (n=${values.length}, chunk=${chunkSize})`);
  }
  const decoded = decode(payload);
  if (!u16Equal(decoded, values)) expect.fail(`decode differs (n=${values.length}, chunk=${chunkSize})`);
  const unverified = decode(payload, undefined, { verify: false });
  if (!u16Equal(unverified, values)) expect.fail(`decode(verify:false) differs (n=${values.length})`);
  return payload;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function u16Equal(a: Uint16Array, b: Uint16Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

afterAll(() => setCodecBackend('auto'));

it('picks WebAssembly SIMD automatically on Node 20', () => {
  setCodecBackend('auto');
  expect(getCodecBackend()).toBe('wasm-simd');
  setCodecBackend('js');
  expect(getCodecBackend()).toBe('js');
  setCodecBackend('auto');
  expect(() => setCodecBackend('gpu' as never)).toThrow(SplitZipError);
});

describe.each(BACKENDS)('round trips on the %s backend', (backend) => {
  it('uses the requested backend', () => {
    useBackend(backend);
    expect(getCodecBackend()).toBe(backend);
  });

  it('Gaussian weights and random bit patterns', () => {
    useBackend(backend);
    for (const values of [gaussianBf16(100_003, 0.02, 1), randomBf16(70_001, 2)]) {
      checkRoundTrip(values, calibrateCodebook(values).codebook);
    }
  });

  it('all 65,536 BF16 bit patterns (NaNs, infinities, subnormals, signed zeros)', () => {
    useBackend(backend);
    const values = allBf16Patterns(3);
    checkRoundTrip(values, calibrateCodebook(values).codebook);
    const sorted = Uint16Array.from({ length: 65536 }, (_, i) => i);
    checkRoundTrip(sorted, calibrateCodebook(sorted).codebook, 64);
    checkRoundTrip(sorted, createCodebook([0, 255]), 65536);
  });

  it('every size 0..5000 (odd, even, around the 1024 chunk)', () => {
    useBackend(backend);
    const all = gaussianBf16(5000, 0.02, 4);
    // Calibrated before the outliers go in, so exponent 255 stays outside the codebook.
    const codebook = calibrateCodebook(all.subarray(0, 3000)).codebook;
    expect(codebook.exponents).not.toContain(255);
    // a few outliers so small tensors have escapes too (value 0 is one: every n >= 1 has an escape)
    for (let i = 0; i < all.length; i += 97) all[i] = 0x7f80 ^ (i & 0x807f);
    for (let n = 0; n <= 5000; n++) {
      const payload = checkRoundTrip(all.subarray(0, n), codebook);
      if (n > 0 && readPayloadMeta(payload).escapeCount < Math.ceil(n / 97)) expect.fail(`n=${n}: only ${readPayloadMeta(payload).escapeCount} escapes`);
    }
  });

  it('sizes around chunk boundaries for chunk sizes 64, 1024 and 65536', () => {
    useBackend(backend);
    for (const chunkSize of [64, 1024, 65536]) {
      const sizes = new Set<number>();
      for (const k of [1, 2, 3]) for (const d of [-2, -1, 0, 1, 2]) sizes.add(k * chunkSize + d);
      const values = valuesWithExponents(3 * chunkSize + 2, [120, 121, 122, 1, 2, 3, 250], 5);
      const codebook = createCodebook([121, 120, 122, 2]);
      for (const n of sizes) checkRoundTrip(values.subarray(0, n), codebook, chunkSize);
    }
  });

  it('escape-heavy data (coverage 50%)', () => {
    useBackend(backend);
    const exps = Array.from({ length: 32 }, (_, k) => 90 + 2 * k);
    const values = valuesWithExponents(40_001, exps, 6);
    const { codebook, coverage } = calibrateCodebook(values);
    expect(coverage).toBeGreaterThan(0.45);
    expect(coverage).toBeLessThan(0.55);
    const payload = checkRoundTrip(values, codebook, 64);
    expect(readPayloadMeta(payload).escapeCount).toBe(Math.round(values.length * (1 - coverage)));
  });

  it('every exponent outside the codebook', () => {
    useBackend(backend);
    const values = valuesWithExponents(10_001, [0, 1, 2, 100, 200, 255], 7);
    const codebook = createCodebook([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]);
    const payload = checkRoundTrip(values, codebook, 64);
    expect(readPayloadMeta(payload).escapeCount).toBe(values.length);
    checkRoundTrip(values, createCodebook([99]), 65536);
  });

  it('codebooks spread over many exponent windows', () => {
    useBackend(backend);
    const spread = Array.from({ length: 16 }, (_, k) => 16 * k + (k % 3));
    const values = valuesWithExponents(20_000, [...spread, 7, 77, 177], 8);
    checkRoundTrip(values, createCodebook(spread));
    checkRoundTrip(values, createCodebook([255, 0, 128]), 128);
  });

  it('unaligned input and output views (byteOffset not a multiple of 4)', () => {
    useBackend(backend);
    const base = valuesWithExponents(5001, [120, 121, 122, 9], 13);
    const codebook = createCodebook([120, 121, 122]);
    for (const offset of [1, 2, 3]) {
      const view = base.subarray(offset);
      const payload = checkRoundTrip(view, codebook, 64);
      // payload at an odd byte offset inside a larger buffer
      const shifted = new Uint8Array(payload.length + 3);
      shifted.set(payload, offset);
      const out = new Uint16Array(view.length + 1);
      decode(shifted.subarray(offset), out.subarray(1));
      expect(u16Equal(out.subarray(1), view)).toBe(true);
      expect(u16Equal(decodeRange(shifted.subarray(offset), 3, 700), view.subarray(3, 703))).toBe(true);
    }
  });

  it('an escapeCount hint: right, too low or too high, the bytes are the same', () => {
    useBackend(backend);
    for (const n of [0, 1, 77, 70_001]) {
      const values = valuesWithExponents(n, [120, 121, 122, 5, 250], 12);
      const codebook = createCodebook([120, 121, 122]);
      const expected = referenceEncode(values, codebook.exponents, 64);
      const escapes = readPayloadMeta(expected).escapeCount;
      for (const hint of new Set([escapes, 0, Math.max(0, escapes - 1), Math.min(n, escapes + 1), n])) {
        const got = encode(values, codebook, { chunkSize: 64, escapeCount: hint });
        if (!bytesEqual(got, expected)) expect.fail(`n=${n} hint=${hint} (escapes ${escapes})`);
        // Into an `out` of exactly the payload's size: a hint above the real count refused it (OUTPUT_TOO_SMALL).
        const into = encode(values, codebook, { chunkSize: 64, escapeCount: hint, out: new Uint8Array(expected.length) });
        if (!bytesEqual(into, expected)) expect.fail(`into out: n=${n} hint=${hint} (escapes ${escapes})`);
      }
      expect(() => encode(values, codebook, { escapeCount: n + 1 })).toThrow(/INVALID_ARGUMENT/);
      expect(() => encode(values, codebook, { escapeCount: -1 })).toThrow(/INVALID_ARGUMENT/);
    }
  });

  it('a tensor of more than 2^24 values', () => {
    useBackend(backend);
    const n = 2 ** 24 + 33;
    const values = new Uint16Array(n);
    const rand = createRandom(9);
    for (let i = 0; i < n; i += 4096) {
      const e = 118 + Math.floor(rand() * 20); // 16 of these are in the codebook, 4 escape
      values.fill((e << 7) | (i & 0x7f) | (i & 0x10000 ? 0x8000 : 0), i, Math.min(n, i + 4096));
    }
    values[n - 1] = 0xffff;
    const codebook = createCodebook(Array.from({ length: 16 }, (_, k) => 118 + k));
    const payload = encode(values, codebook);
    const meta = readPayloadMeta(payload);
    expect(meta.elementCount).toBe(n);
    expect(u16Equal(decode(payload), values)).toBe(true);
    expect(u16Equal(referenceDecode(payload), values)).toBe(true);
    expect(u16Equal(decodeRange(payload, n - 5000, 5000, undefined, { verify: false }), values.subarray(n - 5000))).toBe(true);
  });
});

describe.each(BACKENDS)('decodeRange and decodeChunks on the %s backend', (backend) => {
  const values = valuesWithExponents(1000, [100, 101, 102, 103, 7, 8], 10);
  const codebook = createCodebook([100, 101, 102, 103]);
  const chunkSize = 64;
  const payload = encode(values, codebook, { chunkSize });

  it('every start and several counts, including count 0, start 0 and end n', () => {
    useBackend(backend);
    const n = values.length;
    for (let start = 0; start <= n; start++) {
      for (const count of [0, 1, 2, 3, 31, 32, 33, 63, 64, 65, 130, 500, n - start]) {
        if (start + count > n) continue;
        const got = decodeRange(payload, start, count, undefined, { verify: false });
        if (!u16Equal(got, values.subarray(start, start + count))) expect.fail(`range ${start}+${count}`);
      }
    }
    expect(u16Equal(decodeRange(payload, 0, n), values)).toBe(true);
  });

  it('writes only out[0, count) of a larger out', () => {
    useBackend(backend);
    const out = new Uint16Array(300).fill(0xabcd);
    decodeRange(payload, 190, 100, out);
    expect(u16Equal(out.subarray(0, 100), values.subarray(190, 290))).toBe(true);
    expect(out.subarray(100).every((v) => v === 0xabcd)).toBe(true);
    // an out view at an odd element offset (not 4-byte aligned)
    const big = new Uint16Array(1003).fill(0x1234);
    const view = big.subarray(1, 1002);
    decode(payload, view);
    expect(u16Equal(view.subarray(0, 1000), values)).toBe(true);
    expect(big[0]).toBe(0x1234);
    expect(big[1001]).toBe(0x1234);
    expect(big[1002]).toBe(0x1234);
  });

  it('rejects ranges outside the tensor with INVALID_ARGUMENT', () => {
    useBackend(backend);
    for (const [start, count] of [
      [-1, 1],
      [0, 1001],
      [1000, 1],
      [999, 2],
      [0.5, 1],
      [0, Number.NaN],
    ] as const) {
      expect(() => decodeRange(payload, start, count)).toThrow(/INVALID_ARGUMENT/);
    }
    expect(() => decodeRange(payload, 10, 20, new Uint16Array(19))).toThrow(/OUTPUT_TOO_SMALL/);
  });

  it('decodeChunks: every (first, count) pair equals the slice', () => {
    useBackend(backend);
    const meta = readPayloadMeta(payload);
    expect(meta.chunkCount).toBe(16);
    for (let first = 0; first <= meta.chunkCount; first++) {
      for (let count = 0; first + count <= meta.chunkCount; count++) {
        const start = first * chunkSize;
        const end = Math.min(values.length, (first + count) * chunkSize);
        const out = new Uint16Array(Math.max(0, end - start));
        decodeChunks(payload, meta, first, count, out);
        if (!u16Equal(out, values.subarray(Math.min(start, end), end))) expect.fail(`chunks ${first}+${count}`);
      }
    }
  });

  it('decodeChunks rejects bad arguments', () => {
    useBackend(backend);
    const meta = readPayloadMeta(payload);
    expect(() => decodeChunks(payload, meta, 0, 17, new Uint16Array(2000))).toThrow(/INVALID_ARGUMENT/);
    expect(() => decodeChunks(payload, meta, -1, 1, new Uint16Array(2000))).toThrow(/INVALID_ARGUMENT/);
    expect(() => decodeChunks(payload, meta, 0, 2, new Uint16Array(127))).toThrow(/OUTPUT_TOO_SMALL/);
    expect(() => decodeChunks(payload.subarray(0, 1024), meta, 0, 1, new Uint16Array(64))).toThrow(/TRUNCATED/);
    const forged = { ...meta, elementCount: 100_000, chunkCount: 1563 };
    expect(() => decodeChunks(payload, forged, 0, 1, new Uint16Array(64))).toThrow(/INVALID_ARGUMENT/);
    const shifted = { ...meta, layout: { ...meta.layout, sm: { offsetBytes: 10_000_000, byteLength: 1000 } } };
    expect(() => decodeChunks(payload, shifted, 0, 1, new Uint16Array(64))).toThrow(/INVALID_ARGUMENT/);
  });
});

describe('backends agree', () => {
  it('wasm-simd and js produce identical payloads', () => {
    const values = gaussianBf16(50_001, 0.05, 11);
    const { codebook } = calibrateCodebook(values);
    useBackend('wasm-simd');
    const a = encode(values, codebook, { chunkSize: 256 });
    useBackend('js');
    const b = encode(values, codebook, { chunkSize: 256 });
    setCodecBackend('auto');
    expect(bytesEqual(a, b)).toBe(true);
  });
});
