// A reader that fetches a payload by HTTP ranges has the header's 256 bytes first: readPayloadMeta
// refused them (`TRUNCATED: payload is 256 bytes, header says 8192`), so such a reader could not
// learn the layout without fetching everything. readPayloadHeader validates the header alone with
// the same rules, order and codes, and says what the full check says about the same bytes.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  HEADER_BYTES,
  READABLE_FORMAT_VERSIONS,
  computePayloadLayout,
  createCodebook,
  encode,
  readPayloadHeader,
  readPayloadMeta,
  SplitZipError,
  type PayloadHeader,
  type PayloadMeta,
  type SplitZipErrorCode,
} from '../src/index.js';
import { valuesWithExponents } from './reference.js';

// 201 values, chunk 64, a 3-entry codebook, some escapes: every header field is in play.
const values = valuesWithExponents(201, [120, 121, 122, 9, 250], 1);
const good = encode(values, createCodebook([120, 121, 122]), { chunkSize: 64 });

function mutate(edit: (bytes: Uint8Array, dv: DataView) => void): Uint8Array {
  const bytes = good.slice();
  edit(bytes, new DataView(bytes.buffer));
  return bytes;
}

function failure(run: () => unknown): { code: SplitZipErrorCode | 'none'; message: string; details: unknown } {
  try {
    run();
    return { code: 'none', message: '', details: undefined };
  } catch (error) {
    if (!(error instanceof SplitZipError)) throw error;
    return { code: error.code, message: error.message, details: error.details };
  }
}

/** The header's own bytes, in a buffer of exactly that length (as a Range response gives them). */
const headerOf = (payload: Uint8Array): Uint8Array => payload.slice(0, HEADER_BYTES);

function expectAgrees(header: PayloadHeader, meta: PayloadMeta): void {
  expect(header).toEqual({
    version: meta.version,
    elementCount: meta.elementCount,
    chunkSize: meta.chunkSize,
    chunkCount: meta.chunkCount,
    escapeCount: meta.escapeCount,
    codebook: meta.codebook,
    layout: meta.layout,
    totalBytes: meta.compBytes,
    rawBytes: meta.rawBytes,
    checksum: meta.checksum,
  });
}

describe('readPayloadHeader', () => {
  it("reads the header's 256 bytes alone, which readPayloadMeta refuses as TRUNCATED", () => {
    const head = headerOf(good);
    expect(failure(() => readPayloadMeta(head)).code).toBe('TRUNCATED');
    const header = readPayloadHeader(head);
    expectAgrees(header, readPayloadMeta(good));
    expect(header.layout).toEqual(computePayloadLayout(201, header.escapeCount, 64));
    expect(header.totalBytes).toBe(good.length);
    expect(header.escapeCount).toBeGreaterThan(0);
  });

  // Each header field wrong: the same code, message and details as readPayloadMeta on the full payload.
  const cases: [string, SplitZipErrorCode, Uint8Array][] = [
    ['wrong magic', 'BAD_MAGIC', mutate((b) => (b[0] = 0x54))],
    ['version 4', 'UNSUPPORTED_VERSION', mutate((b, dv) => dv.setUint16(4, 4, true))],
    ['version 0', 'UNSUPPORTED_VERSION', mutate((b, dv) => dv.setUint16(4, 0, true))],
    ['header_bytes 512', 'BAD_HEADER', mutate((b, dv) => dv.setUint16(6, 512, true))],
    ['flags set', 'BAD_HEADER', mutate((b, dv) => dv.setUint32(8, 1, true))],
    ['reserved byte 38 set', 'BAD_HEADER', mutate((b) => (b[38] = 1))],
    ['reserved byte 200 set', 'BAD_HEADER', mutate((b) => (b[200] = 1))],
    ['chunk_size 100', 'BAD_HEADER', mutate((b, dv) => dv.setUint32(12, 100, true))],
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
    // Two fields wrong: the earlier rule's error wins, in both readers.
    ['flags and codebook_size', 'BAD_HEADER', mutate((b, dv) => (dv.setUint32(8, 1, true), (b[36] = 0)))],
    ['codebook_size and total_bytes', 'INVALID_CODEBOOK', mutate((b, dv) => (dv.setBigUint64(136, 7n, true), (b[36] = 0)))],
  ];
  it.each(cases)('%s -> %s, as readPayloadMeta says', (_, code, payload) => {
    const fromHeader = failure(() => readPayloadHeader(headerOf(payload)));
    expect(fromHeader.code).toBe(code);
    expect(fromHeader).toEqual(failure(() => readPayloadMeta(payload)));
    expect(failure(() => readPayloadHeader(payload))).toEqual(fromHeader);
  });

  it('TRUNCATED only for fewer bytes than the header; INVALID_ARGUMENT for a non-Uint8Array', () => {
    for (const length of [0, 4, HEADER_BYTES - 1]) {
      const result = failure(() => readPayloadHeader(good.slice(0, length)));
      expect(result).toEqual(failure(() => readPayloadMeta(good.slice(0, length))));
      expect(result.code).toBe('TRUNCATED');
      expect(result.message).toContain(`${length} bytes, shorter than the ${HEADER_BYTES}-byte header`);
    }
    const wrong = failure(() => readPayloadHeader(Array.from(headerOf(good)) as never));
    expect(wrong.code).toBe('INVALID_ARGUMENT');
    expect(wrong.message).toContain('payload must be a Uint8Array, got object [object Array] of length 256');
  });

  it('agrees with readPayloadMeta on whole payloads (empty, chunk sizes, escapes, an offset view, trailing bytes)', () => {
    const payloads = [
      encode(new Uint16Array(0), createCodebook([0])),
      encode(values, createCodebook([120, 121, 122])),
      encode(values, createCodebook([120]), { chunkSize: 65536 }),
      encode(valuesWithExponents(5000, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17], 3), createCodebook([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])),
      good,
    ];
    for (const payload of payloads) {
      expectAgrees(readPayloadHeader(payload), readPayloadMeta(payload));
      expectAgrees(readPayloadHeader(headerOf(payload)), readPayloadMeta(payload));
      const shifted = new Uint8Array(payload.length + 1003);
      shifted.set(payload, 3);
      expectAgrees(readPayloadHeader(shifted.subarray(3, 3 + HEADER_BYTES)), readPayloadMeta(shifted.subarray(3)));
    }
  });

  it('reads the header prefix of a real payload of every readable format version', () => {
    const dirs = [new URL('./golden/', import.meta.url), new URL('./golden/v1/', import.meta.url), new URL('./golden/v2/', import.meta.url)];
    const seen = new Set<number>();
    for (const dir of dirs) {
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
        const hex = (JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as { payloadHex: string[] }).payloadHex.join('');
        const payload = Uint8Array.from({ length: hex.length / 2 }, (_, i) => parseInt(hex.slice(2 * i, 2 * i + 2), 16));
        const meta = readPayloadMeta(payload);
        const header = readPayloadHeader(headerOf(payload));
        expectAgrees(header, meta);
        seen.add(header.version);
      }
    }
    expect([...seen].sort()).toEqual([...READABLE_FORMAT_VERSIONS]);
  });
});
