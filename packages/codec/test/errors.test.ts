import { afterAll, describe, expect, it } from 'vitest';
import {
  createCodebook,
  decode,
  decodeRange,
  encode,
  readPayloadMeta,
  setCodecBackend,
  SplitZipError,
  verifyPayloadChecksum,
  type SplitZipErrorCode,
} from '../src/index.js';
import { BACKENDS, useBackend } from './backends.js';
import { resealPayload, valuesWithExponents } from './reference.js';

// 200 values, chunk 64 (4 chunks), codebook of 3 so codes 3..15 are invalid, some escapes.
const values = valuesWithExponents(201, [120, 121, 122, 9, 250], 1);
const codebook = createCodebook([120, 121, 122]);
const good = encode(values, codebook, { chunkSize: 64 });
const meta = readPayloadMeta(good);

function mutate(edit: (bytes: Uint8Array, dv: DataView) => void, reseal = false): Uint8Array {
  const bytes = good.slice();
  edit(bytes, new DataView(bytes.buffer));
  return reseal ? resealPayload(bytes) : bytes;
}

function codeOf(fn: () => unknown): SplitZipErrorCode | 'none' {
  try {
    fn();
    return 'none';
  } catch (error) {
    if (!(error instanceof SplitZipError)) throw error;
    expect(error.message).toContain(error.code);
    expect(typeof error.details).toBe('object');
    return error.code;
  }
}

afterAll(() => setCodecBackend('auto'));

describe('header errors (readPayloadMeta, decode)', () => {
  const cases: [string, SplitZipErrorCode, Uint8Array][] = [
    ['shorter than the header', 'TRUNCATED', good.subarray(0, 255)],
    ['shorter than total_bytes', 'TRUNCATED', good.subarray(0, good.length - 1)],
    ['wrong magic', 'BAD_MAGIC', mutate((b) => (b[0] = 0x54))],
    ['version 4', 'UNSUPPORTED_VERSION', mutate((b, dv) => dv.setUint16(4, 4, true))],
    ['version 0', 'UNSUPPORTED_VERSION', mutate((b, dv) => dv.setUint16(4, 0, true))],
    ['header_bytes 512', 'BAD_HEADER', mutate((b, dv) => dv.setUint16(6, 512, true))],
    ['flags set', 'BAD_HEADER', mutate((b, dv) => dv.setUint32(8, 1, true))],
    ['reserved byte 38 set', 'BAD_HEADER', mutate((b) => (b[38] = 1))],
    ['reserved byte 200 set', 'BAD_HEADER', mutate((b) => (b[200] = 1))],
    ['chunk_size 100', 'BAD_HEADER', mutate((b, dv) => dv.setUint32(12, 100, true))],
    ['chunk_size 32', 'BAD_HEADER', mutate((b, dv) => dv.setUint32(12, 32, true))],
    ['chunk_size 2^17', 'BAD_HEADER', mutate((b, dv) => dv.setUint32(12, 131072, true))],
    ['element_count 2^32', 'BAD_HEADER', mutate((b, dv) => dv.setBigUint64(16, 2n ** 32n, true))],
    ['element_count 2^64-1', 'BAD_HEADER', mutate((b, dv) => dv.setBigUint64(16, 2n ** 64n - 1n, true))],
    ['chunk_count off by one', 'BAD_HEADER', mutate((b, dv) => dv.setUint32(32, 5, true))],
    ['escape_count above n', 'BAD_HEADER', mutate((b, dv) => dv.setBigUint64(24, 202n, true))],
    ['codebook_size 0', 'INVALID_CODEBOOK', mutate((b) => (b[36] = 0))],
    ['codebook_size 17', 'INVALID_CODEBOOK', mutate((b) => (b[36] = 17))],
    ['duplicate codebook entries', 'INVALID_CODEBOOK', mutate((b) => (b[41] = b[40]!))],
    ['non-zero unused codebook entry', 'INVALID_CODEBOOK', mutate((b) => (b[55] = 1))],
    ['codes offset moved', 'BAD_SECTION', mutate((b, dv) => dv.setBigUint64(56, 512n, true))],
    ['sm length wrong', 'BAD_SECTION', mutate((b, dv) => dv.setBigUint64(80, 200n, true))],
    ['escape exp offset above 2^53', 'BAD_SECTION', mutate((b, dv) => dv.setBigUint64(120, 2n ** 60n, true))],
    ['total_bytes wrong', 'BAD_SECTION', mutate((b, dv) => dv.setBigUint64(136, BigInt(good.length + 256), true))],
  ];
  for (const [name, code, payload] of cases) {
    it(`${name} -> ${code}`, () => {
      expect(codeOf(() => readPayloadMeta(payload))).toBe(code);
      expect(codeOf(() => decode(payload))).toBe(code);
      expect(codeOf(() => decode(payload, undefined, { verify: false }))).toBe(code);
    });
  }

  it('bytes past total_bytes are ignored', () => {
    const padded = new Uint8Array(good.length + 1000);
    padded.set(good);
    padded.fill(0xff, good.length);
    expect(decode(padded)).toEqual(values);
  });

  it('non-Uint8Array input -> INVALID_ARGUMENT', () => {
    expect(codeOf(() => readPayloadMeta([1, 2, 3] as unknown as Uint8Array))).toBe('INVALID_ARGUMENT');
  });
});

describe.each(BACKENDS)('decoding errors on the %s backend', (backend) => {
  const posAt = meta.layout.escapePositions.offsetBytes;
  const idxAt = meta.layout.escapeIndex.offsetBytes;
  const codesAt = meta.layout.codes.offsetBytes;

  it('a flipped byte -> CHECKSUM_MISMATCH (and verifyPayloadChecksum agrees)', () => {
    useBackend(backend);
    const bad = mutate((b) => (b[meta.layout.sm.offsetBytes + 7]! ^= 0x10));
    expect(codeOf(() => decode(bad))).toBe('CHECKSUM_MISMATCH');
    expect(codeOf(() => decodeRange(bad, 0, 1))).toBe('CHECKSUM_MISMATCH');
    expect(codeOf(() => verifyPayloadChecksum(bad))).toBe('CHECKSUM_MISMATCH');
    expect(codeOf(() => verifyPayloadChecksum(good))).toBe('none');
    expect(codeOf(() => verifyPayloadChecksum(good, meta))).toBe('none');
    expect(codeOf(() => verifyPayloadChecksum(good, { ...meta, compBytes: 300 }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => verifyPayloadChecksum(good.subarray(0, 600), meta))).toBe('TRUNCATED');
    const badPadding = mutate((b) => (b[meta.layout.sm.offsetBytes + 250] = 1));
    expect(codeOf(() => decode(badPadding))).toBe('CHECKSUM_MISMATCH');
  });

  it('escape index not starting at 0 / not ending at escape_count / decreasing -> BAD_ESCAPE_INDEX', () => {
    useBackend(backend);
    const e = meta.escapeCount;
    expect(e).toBeGreaterThan(4);
    for (const edit of [
      (dv: DataView) => dv.setUint32(idxAt, 1, true),
      (dv: DataView) => dv.setUint32(idxAt + 16, e + 1, true),
      (dv: DataView) => dv.setUint32(idxAt + 8, 0xffffffff, true),
      (dv: DataView) => dv.setUint32(idxAt + 8, dv.getUint32(idxAt + 4, true) - 1, true),
    ]) {
      const bad = mutate((b, dv) => edit(dv), true);
      expect(codeOf(() => decode(bad))).toBe('BAD_ESCAPE_INDEX');
      expect(codeOf(() => decode(bad, undefined, { verify: false }))).toBe('BAD_ESCAPE_INDEX');
    }
    // more escapes in a chunk than values: the short last chunk (201 = 3 x 64 + 9) holds 9 values
    const fake = mutate((b, dv) => {
      dv.setUint32(idxAt + 12, 0, true); // chunks 0..2 hold nothing, chunk 3 holds every escape
      dv.setUint32(idxAt + 4, 0, true);
      dv.setUint32(idxAt + 8, 0, true);
    }, true);
    expect(codeOf(() => decode(fake))).toBe('BAD_ESCAPE_INDEX');
  });

  it('an empty tensor whose one index entry is not 0 -> BAD_ESCAPE_INDEX (decode, decodeRange, unverified too)', () => {
    useBackend(backend);
    const empty = encode(new Uint16Array(0), codebook, { chunkSize: 64 });
    const emptyMeta = readPayloadMeta(empty);
    const bad = empty.slice();
    new DataView(bad.buffer).setUint32(emptyMeta.layout.escapeIndex.offsetBytes, 1, true);
    const sealed = resealPayload(bad);
    expect(codeOf(() => decode(sealed))).toBe('BAD_ESCAPE_INDEX');
    expect(codeOf(() => decode(sealed, undefined, { verify: false }))).toBe('BAD_ESCAPE_INDEX');
    expect(codeOf(() => decodeRange(sealed, 0, 0))).toBe('BAD_ESCAPE_INDEX');
    expect(decode(empty).length).toBe(0);
  });

  it('escape positions out of order or outside the chunk -> BAD_ESCAPE_POSITION', () => {
    useBackend(backend);
    const first = new DataView(good.buffer).getUint16(posAt, true);
    const second = new DataView(good.buffer).getUint16(posAt + 2, true);
    expect(second).toBeGreaterThan(first);
    const swapped = mutate((b, dv) => {
      dv.setUint16(posAt, second, true);
      dv.setUint16(posAt + 2, first, true);
    }, true);
    expect(codeOf(() => decode(swapped))).toBe('BAD_ESCAPE_POSITION');
    const repeated = mutate((b, dv) => dv.setUint16(posAt + 2, first, true), true);
    expect(codeOf(() => decode(repeated))).toBe('BAD_ESCAPE_POSITION');
    const outside = mutate((b, dv) => dv.setUint16(posAt + 2 * (meta.escapeCount - 1), 9, true), true);
    expect(codeOf(() => decode(outside, undefined, { verify: false }))).toBe('BAD_ESCAPE_POSITION');
    const huge = mutate((b, dv) => dv.setUint16(posAt, 0xffff, true), true);
    expect(codeOf(() => decodeRange(huge, 0, 5))).toBe('BAD_ESCAPE_POSITION');
  });

  it('a code >= codebook size, or a non-zero padding nibble -> INVALID_CODE', () => {
    useBackend(backend);
    for (const at of [0, 31, 32, 99]) {
      const bad = mutate((b) => (b[codesAt + at] = (b[codesAt + at]! & 0xf0) | 0x3), true);
      expect(codeOf(() => decode(bad))).toBe('INVALID_CODE');
      expect(codeOf(() => decodeRange(bad, 2 * at, 1))).toBe('INVALID_CODE');
      // values outside the range are not judged
      expect(codeOf(() => decodeRange(bad, 2 * at + 1, 1))).toBe('none');
      const high = mutate((b) => (b[codesAt + at] = (b[codesAt + at]! & 0x0f) | 0xf0), true);
      expect(codeOf(() => decodeRange(high, 2 * at + 1, 1, undefined, { verify: false }))).toBe('INVALID_CODE');
    }
    const last = mutate((b) => (b[codesAt + 100] = (b[codesAt + 100]! & 0xf0) | 0x3), true);
    expect(codeOf(() => decodeRange(last, 200, 1))).toBe('INVALID_CODE');
    const padding = mutate((b) => (b[codesAt + 100]! |= 0x10), true);
    expect(codeOf(() => decode(padding))).toBe('INVALID_CODE');
    expect(codeOf(() => decodeRange(padding, 0, 200))).toBe('none');
    expect(codeOf(() => decodeRange(padding, 200, 1))).toBe('INVALID_CODE');
  });

  it('out too small -> OUTPUT_TOO_SMALL; bad out / options -> INVALID_ARGUMENT', () => {
    useBackend(backend);
    expect(codeOf(() => decode(good, new Uint16Array(200)))).toBe('OUTPUT_TOO_SMALL');
    expect(codeOf(() => decode(good, new Uint8Array(402) as unknown as Uint16Array))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => decode(good, new Uint16Array(201)))).toBe('none');
  });
});

describe('encode argument errors -> INVALID_ARGUMENT / INVALID_CODEBOOK', () => {
  it('rejects bad input', () => {
    expect(codeOf(() => encode([1, 2] as unknown as Uint16Array, codebook))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => encode(values, codebook, { chunkSize: 100 }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => encode(values, codebook, { chunkSize: 32 }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => encode(values, { exponents: [1, 1] }))).toBe('INVALID_CODEBOOK');
    expect(codeOf(() => encode(values, null as never))).toBe('INVALID_CODEBOOK');
  });
});
