// Format version 3: the checksum per segment of 2^20 values (FORMAT.md "Version 3: segments") and the
// segment API for verifying one payload on several threads. Sizes sit on the segment edges; every
// payload is compared byte for byte with the scalar reference encoder (the oracle).
import { afterAll, describe, expect, it } from 'vitest';
import {
  calibrateCodebook,
  combineSegmentDigests,
  computeSegmentDigests,
  computeSegmentSpans,
  countPayloadSegments,
  createCodebook,
  createCodecArena,
  createPayloadWriter,
  decode,
  decodeSegments,
  encode,
  readPayloadMeta,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  setCodecBackend,
  verifyPayloadChecksum,
  verifySegmentDigests,
  type PayloadMeta,
} from '../src/index.js';
import { BACKENDS, codeOf, useBackend } from './backends.js';
import { createRandom, gaussianBf16, referenceChecksum, referenceEncode } from './reference.js';
import { sameBytes, weightsWithEscapes } from './fixtures.js';

afterAll(() => setCodecBackend('auto'));

const S = SEGMENT_VALUES;
// Empty, partial and whole first groups, around one segment, and a short fourth segment.
const EDGE_SIZES = [0, 1, 31, 32, S - 1, S, S + 1, 3 * S + 17];

const fixture = (n: number, seed: number) => weightsWithEscapes(n, seed, 4099, 14);

/** All segment digests of a payload, computed over `parts` consecutive ranges (a split across threads). */
function digestsInParts(payload: Uint8Array, meta: PayloadMeta, cuts: number[]): Uint32Array {
  const count = countPayloadSegments(payload, meta);
  const bounds = [0, ...cuts.filter((c) => c > 0 && c < count).sort((x, y) => x - y), count];
  const all = new Uint32Array(SEGMENT_DIGESTS * count);
  for (let p = 0; p + 1 < bounds.length; p++) {
    all.set(computeSegmentDigests(payload, meta, bounds[p]!, bounds[p + 1]!), SEGMENT_DIGESTS * bounds[p]!);
  }
  return all;
}

describe.each(BACKENDS)('format version 3 on the %s backend', (backend) => {
  it('encode gives the reference bytes and decode the values at every segment edge', () => {
    useBackend(backend);
    for (const n of EDGE_SIZES) {
      const { values, exponents } = fixture(n, n + 3);
      const payload = encode(values, createCodebook(exponents));
      const expected = referenceEncode(values, exponents);
      if (!sameBytes(payload, expected)) expect.fail(`bytes differ from the reference at n=${n}`);
      const meta = readPayloadMeta(payload);
      expect(meta.version).toBe(3);
      expect(meta.checksum).toBe(referenceChecksum(payload));
      expect(countPayloadSegments(payload, meta)).toBe(Math.ceil(n / S));
      if (!sameBytes(decode(payload), values)) expect.fail(`decode differs at n=${n}`);
      expect(() => verifyPayloadChecksum(payload)).not.toThrow();
      const whole = computeSegmentDigests(payload, meta, 0, Math.ceil(n / S));
      expect(combineSegmentDigests(payload, meta, whole)).toBe(meta.checksum);
    }
  });

  it('in a codec arena: encode, fused decode + verify, segment digests and decodeSegments in place', () => {
    useBackend(backend);
    const arena = createCodecArena(24 << 20);
    // 2^20 + 101: the last segment is 3 whole groups and a partial one (an odd group count before
    // the partial group decoded through scratch).
    for (const n of [31, 101, S + 101, 2 * S + 64, 2 * S + 65]) {
      arena.reset();
      const { values, exponents } = fixture(n, n);
      const expected = referenceEncode(values, exponents);
      const input = arena.allocateValues(n);
      input.set(values);
      const slot = arena.allocate(expected.length).fill(0xa5);
      const payload = encode(input, createCodebook(exponents), { out: slot });
      if (!sameBytes(payload, expected)) expect.fail(`arena encode differs at n=${n}`);
      const out = arena.allocateValues(n);
      decode(payload, out);
      if (!sameBytes(out, values)) expect.fail(`arena decode differs at n=${n}`);
      const meta = readPayloadMeta(payload);
      const count = countPayloadSegments(payload, meta);
      const digests = new Uint32Array(SEGMENT_DIGESTS * count);
      out.fill(0);
      decodeSegments(payload, meta, 0, count, out, { digests });
      if (!sameBytes(out, values)) expect.fail(`arena decodeSegments differs at n=${n}`);
      expect(Array.from(digests)).toEqual(Array.from(computeSegmentDigests(payload, meta, 0, count)));
      expect(Array.from(digests)).toEqual(Array.from(computeSegmentDigests(expected, readPayloadMeta(expected), 0, count)));
      verifySegmentDigests(payload, meta, digests);
    }
  });

  it('the segment API over random splits gives the whole-payload checksum and the values', () => {
    useBackend(backend);
    const rand = createRandom(7);
    const n = 5 * S + 333;
    const { values, exponents } = fixture(n, 9);
    const payload = encode(values, createCodebook(exponents));
    const meta = readPayloadMeta(payload);
    const count = countPayloadSegments(payload, meta);
    expect(count).toBe(6);
    for (let trial = 0; trial < 4; trial++) {
      const cuts = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => Math.floor(rand() * (count + 1)));
      const digests = digestsInParts(payload, meta, cuts);
      expect(combineSegmentDigests(payload, meta, digests)).toBe(meta.checksum);
      verifySegmentDigests(payload, meta, digests);
      // decodeSegments on the same split (as worker threads would): values and digests agree.
      const first = Math.floor(rand() * count);
      const end = first + 1 + Math.floor(rand() * (count - first));
      const from = first * S;
      const to = Math.min(n, end * S);
      const out = new Uint16Array(to - from + 5).fill(0x7777);
      const part = new Uint32Array(SEGMENT_DIGESTS * (end - first));
      decodeSegments(payload, meta, first, end, out, { digests: part });
      if (!sameBytes(out.subarray(0, to - from), values.subarray(from, to))) expect.fail(`decodeSegments [${first}, ${end}) differs`);
      expect(Array.from(out.subarray(to - from))).toEqual([0x7777, 0x7777, 0x7777, 0x7777, 0x7777]);
      expect(Array.from(part)).toEqual(Array.from(digests.subarray(SEGMENT_DIGESTS * first, SEGMENT_DIGESTS * end)));
      const plain = new Uint16Array(to - from);
      decodeSegments(payload, meta, first, end, plain);
      if (!sameBytes(plain, values.subarray(from, to))) expect.fail('decodeSegments without digests differs');
    }
    // An empty range is allowed and gives nothing.
    expect(computeSegmentDigests(payload, meta, 2, 2).length).toBe(0);
  });

  it('a flipped byte anywhere in any segment (padding included) fails the checksum', () => {
    useBackend(backend);
    const n = 2 * S + 1000; // a short third segment with padding after its last values
    const { values, exponents } = fixture(n, 21);
    const payload = encode(values, createCodebook(exponents));
    const meta = readPayloadMeta(payload);
    const { codes, sm, escapeIndex } = meta.layout;
    const rand = createRandom(3);
    const spots = new Set<number>();
    for (let k = 0; k < 3; k++) {
      const codesFrom = codes.offsetBytes + k * (S / 2);
      const codesTo = k === 2 ? sm.offsetBytes : codesFrom + S / 2;
      const smFrom = sm.offsetBytes + k * S;
      const smTo = k === 2 ? escapeIndex.offsetBytes : smFrom + S;
      for (const [from, to] of [
        [codesFrom, codesTo],
        [smFrom, smTo],
      ] as const) {
        // The first and last stripe of every stream, each segment's edges, and random bytes.
        for (let b = 0; b < 64; b++) spots.add(from + b).add(to - 1 - b);
        for (let r = 0; r < 16; r++) spots.add(from + Math.floor(rand() * (to - from)));
      }
    }
    const count = countPayloadSegments(payload, meta);
    for (const at of spots) {
      const bad = payload.slice();
      bad[at]! ^= 1 << (at & 7);
      expect(codeOf(() => decode(bad)), `decode, flip at ${at}`).toBe('CHECKSUM_MISMATCH');
      const digests = digestsInParts(bad, meta, [1 + (at % 2)]);
      expect(codeOf(() => verifySegmentDigests(bad, meta, digests)), `segments, flip at ${at}`).toBe('CHECKSUM_MISMATCH');
    }
    expect(spots.size).toBeGreaterThan(700);
    expect(count).toBe(3);
  });

  it('segment k decodes and hashes from the header, the escape sections and its own spans alone (streamed reads)', () => {
    useBackend(backend);
    const n = 3 * S + 17;
    const { values, exponents } = fixture(n, 41);
    const payload = encode(values, createCodebook(exponents));
    const meta = readPayloadMeta(payload);
    const all = computeSegmentDigests(payload, meta, 0, 4);
    // The spans tile the codes and sm sections' spans, in order, each segment's non-empty.
    let codesAt = meta.layout.codes.offsetBytes;
    let smAt = meta.layout.sm.offsetBytes;
    for (let k = 0; k < 4; k++) {
      const span = computeSegmentSpans(meta.layout, k);
      expect([span.codes, span.sm]).toEqual([codesAt, smAt]);
      expect(span.codesEnd > span.codes && span.smEnd > span.sm).toBe(true);
      [codesAt, smAt] = [span.codesEnd, span.smEnd];
    }
    expect([codesAt, smAt]).toEqual([meta.layout.sm.offsetBytes, meta.layout.escapeIndex.offsetBytes]);
    for (let k = 0; k < 4; k++) {
      // Every other segment's bytes zeroed, as if not yet read: a decode that read them would differ.
      const partial = new Uint8Array(payload.length);
      const span = computeSegmentSpans(meta.layout, k);
      for (const [from, to] of [[0, meta.layout.codes.offsetBytes], [span.codes, span.codesEnd], [span.sm, span.smEnd], [meta.layout.escapeIndex.offsetBytes, payload.length]]) {
        partial.set(payload.subarray(from, to), from);
      }
      const count = Math.min(S, n - k * S);
      const out = new Uint16Array(count);
      const digests = new Uint32Array(SEGMENT_DIGESTS);
      decodeSegments(partial, meta, k, k + 1, out, { digests });
      if (!sameBytes(out, values.subarray(k * S, k * S + count))) expect.fail(`segment ${k} differs`);
      expect([...digests]).toEqual([...all.subarray(k * SEGMENT_DIGESTS, (k + 1) * SEGMENT_DIGESTS)]);
    }
  });

  it('every byte of a small payload is covered exactly once: any single flip is caught', () => {
    useBackend(backend);
    const { values, exponents } = fixture(1000, 4);
    const payload = encode(values, createCodebook(exponents), { chunkSize: 64 });
    const meta = readPayloadMeta(payload);
    for (let at = 0; at < payload.length; at++) {
      if (at >= 252 && at < 256) continue; // the checksum field itself
      const bad = payload.slice();
      bad[at]! ^= 0x10;
      // The stale meta says version 3 and the sections' places; a flipped version byte is refused as such.
      const expected = at === 4 || at === 5 ? 'UNSUPPORTED_VERSION' : 'CHECKSUM_MISMATCH';
      const code = codeOf(() => verifySegmentDigests(bad, meta, computeSegmentDigests(bad, meta, 0, 1)));
      if (code !== expected) expect.fail(`flip at ${at}: ${code}`);
    }
  });
});

describe('segment API arguments', () => {
  const { values, exponents } = fixture(S + 5, 1);
  const payload = encode(values, createCodebook(exponents));
  const meta = readPayloadMeta(payload);

  it('rejects version-1 and version-2 payloads with UNSUPPORTED_VERSION', () => {
    for (const version of [1, 2] as const) {
      const old = referenceEncode(values.subarray(0, 100), exponents, 1024, version);
      const oldMeta = readPayloadMeta(old);
      expect(codeOf(() => computeSegmentDigests(old, oldMeta, 0, 1))).toBe('UNSUPPORTED_VERSION');
      expect(codeOf(() => decodeSegments(old, oldMeta, 0, 1, new Uint16Array(100)))).toBe('UNSUPPORTED_VERSION');
      expect(codeOf(() => combineSegmentDigests(old, oldMeta, new Uint32Array(6)))).toBe('UNSUPPORTED_VERSION');
      expect(codeOf(() => verifySegmentDigests(old, oldMeta, new Uint32Array(6)))).toBe('UNSUPPORTED_VERSION');
      expect(codeOf(() => countPayloadSegments(old, oldMeta))).toBe('UNSUPPORTED_VERSION');
      // A meta that claims version 3 for a version-2 payload is refused too.
      expect(codeOf(() => computeSegmentDigests(old, { ...oldMeta, version: 3 }, 0, 1))).toBe('UNSUPPORTED_VERSION');
    }
  });

  it('rejects bad ranges, digest arrays, outputs, payloads and metas with typed errors', () => {
    expect(codeOf(() => computeSegmentDigests(payload, meta, 0, 3))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => computeSegmentDigests(payload, meta, 2, 1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => computeSegmentDigests(payload, meta, -1, 1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => computeSegmentDigests(payload, meta, 0.5, 1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => computeSegmentDigests(payload, meta, 0, Number.NaN))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => decodeSegments(payload, meta, 0, 2, new Uint16Array(S + 4)))).toBe('OUTPUT_TOO_SMALL');
    expect(codeOf(() => decodeSegments(payload, meta, 0, 2, new Uint8Array(2 * S + 10) as never))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => decodeSegments(payload, meta, 0, 2, new Uint16Array(S + 5), { digests: new Uint32Array(11) }))).toBe('OUTPUT_TOO_SMALL');
    expect(codeOf(() => decodeSegments(payload, meta, 0, 2, new Uint16Array(S + 5), { digests: [] as never }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => combineSegmentDigests(payload, meta, new Uint32Array(6)))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => combineSegmentDigests(payload, meta, new Uint32Array(18)))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => verifySegmentDigests(payload, meta, new Uint32Array(12)))).toBe('CHECKSUM_MISMATCH');
    expect(codeOf(() => computeSegmentDigests(payload.subarray(0, payload.length - 256), meta, 0, 1))).toBe('TRUNCATED');
    expect(codeOf(() => computeSegmentDigests(payload, { ...meta, elementCount: 5 }, 0, 1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => computeSegmentDigests([] as never, meta, 0, 1))).toBe('INVALID_ARGUMENT');
  });

  it('an empty tensor has zero segments; its checksum is the header and escape spans only', () => {
    const empty = encode(new Uint16Array(0), createCodebook([0]));
    const emptyMeta = readPayloadMeta(empty);
    expect(countPayloadSegments(empty, emptyMeta)).toBe(0);
    expect(computeSegmentDigests(empty, emptyMeta, 0, 0).length).toBe(0);
    expect(combineSegmentDigests(empty, emptyMeta, new Uint32Array(0))).toBe(emptyMeta.checksum);
    decodeSegments(empty, emptyMeta, 0, 0, new Uint16Array(0), { digests: new Uint32Array(0) });
  });

  it('the payload writer seals version 3 with the same checksum as encode', () => {
    const n = S + 77;
    const clean = gaussianBf16(n, 0.02, 5);
    const book = createCodebook(calibrateCodebook(clean).codebook.exponents);
    const reference = encode(clean, book);
    const refMeta = readPayloadMeta(reference);
    const w = createPayloadWriter(n, refMeta.escapeCount, book);
    expect(w.bytes[4]).toBe(3);
    w.codes.set(reference.subarray(refMeta.layout.codes.offsetBytes, refMeta.layout.codes.offsetBytes + refMeta.layout.codes.byteLength));
    w.sm.set(reference.subarray(refMeta.layout.sm.offsetBytes, refMeta.layout.sm.offsetBytes + refMeta.layout.sm.byteLength));
    const index = new Uint8Array(w.escapeIndex.buffer, w.escapeIndex.byteOffset, w.escapeIndex.byteLength);
    index.set(reference.subarray(refMeta.layout.escapeIndex.offsetBytes, refMeta.layout.escapeIndex.offsetBytes + refMeta.layout.escapeIndex.byteLength));
    const pos = new Uint8Array(w.escapePositions.buffer, w.escapePositions.byteOffset, w.escapePositions.byteLength);
    pos.set(reference.subarray(refMeta.layout.escapePositions.offsetBytes, refMeta.layout.escapePositions.offsetBytes + refMeta.layout.escapePositions.byteLength));
    w.escapeExponents.set(reference.subarray(refMeta.layout.escapeExponents.offsetBytes, refMeta.layout.escapeExponents.offsetBytes + refMeta.layout.escapeExponents.byteLength));
    expect(sameBytes(w.seal(), reference)).toBe(true);
  });
});
