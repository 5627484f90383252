// The version-3 checksum split into segment digests and the outer (header and escape sections)
// digests, computed apart (as the worker decoder's threads do): the combination must be the stored
// checksum exactly, and any flipped byte outside the segments must fail it.
import { afterAll, describe, expect, it } from 'vitest';
import {
  combineOuterDigests,
  combineSegmentDigests,
  computeOuterDigests,
  computeSegmentDigests,
  createCodebook,
  createCodecArena,
  encode,
  OUTER_DIGESTS,
  readPayloadMeta,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  setCodecBackend,
  verifyOuterDigests,
} from '../src/index.js';
import { BACKENDS, codeOf, useBackend } from './backends.js';
import { sameBytes, weightsWithEscapes } from './fixtures.js';
import { allBf16Patterns, randomBf16, referenceChecksum, referenceEncode } from './reference.js';

afterAll(() => setCodecBackend('auto'));

const S = SEGMENT_VALUES;

/** Payloads of every kind the brief names: escape-heavy, random bits, odd sizes, all 65,536 patterns. */
function cases(): { name: string; payload: Uint8Array }[] {
  const out: { name: string; payload: Uint8Array }[] = [];
  for (const n of [0, 1, 33, 1000, S - 1, S + 101, 2 * S + 65]) {
    const { values, exponents } = weightsWithEscapes(n, n + 11, 97, 12);
    out.push({ name: `escape-heavy n=${n}`, payload: encode(values, createCodebook(exponents), { chunkSize: n % 2 === 0 ? 1024 : 64 }) });
  }
  const random = randomBf16(3 * S + 7, 5);
  out.push({ name: 'random bits', payload: encode(random, createCodebook([120, 121, 122, 123, 124, 125, 126, 127])) });
  const patterns = allBf16Patterns(17);
  out.push({ name: 'all 65,536 patterns', payload: referenceEncode(patterns, [119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134]) });
  return out;
}

describe.each(BACKENDS)('outer digests on the %s backend', (backend) => {
  it('segment digests + outer digests combine to the stored checksum, as combineSegmentDigests does', () => {
    useBackend(backend);
    for (const { name, payload } of cases()) {
      const meta = readPayloadMeta(payload);
      const count = Math.ceil(meta.elementCount / S);
      const segments = computeSegmentDigests(payload, meta, 0, count);
      const outer = computeOuterDigests(payload, meta);
      expect(outer.length, name).toBe(OUTER_DIGESTS);
      expect(combineOuterDigests(payload, meta, segments, outer), name).toBe(meta.checksum);
      expect(combineOuterDigests(payload, meta, segments, outer), name).toBe(combineSegmentDigests(payload, meta, segments));
      expect(meta.checksum, name).toBe(referenceChecksum(payload));
      expect(() => verifyOuterDigests(payload, meta, segments, outer), name).not.toThrow();
      // Into a caller's array (a slice of a shared digest buffer), the same digests.
      const shared = new Uint32Array(new SharedArrayBuffer(4 * (SEGMENT_DIGESTS * count + OUTER_DIGESTS + 3)));
      const into = shared.subarray(SEGMENT_DIGESTS * count, SEGMENT_DIGESTS * count + OUTER_DIGESTS);
      expect(computeOuterDigests(payload, meta, into)).toBe(into);
      expect(Array.from(into), name).toEqual(Array.from(outer));
    }
  });

  it('in a codec arena, in place: the same digests', () => {
    useBackend(backend);
    const arena = createCodecArena(8 << 20);
    const { values, exponents } = weightsWithEscapes(S + 3, 2, 31, 10);
    const payload = encode(values, createCodebook(exponents));
    const slot = arena.allocate(payload.length);
    slot.set(payload);
    const meta = readPayloadMeta(slot);
    expect(Array.from(computeOuterDigests(slot, meta))).toEqual(Array.from(computeOuterDigests(payload, readPayloadMeta(payload))));
    expect(sameBytes(slot, payload)).toBe(true);
  });

  it('a flipped byte in the header or any escape section (padding included) fails the combination', () => {
    useBackend(backend);
    const { values, exponents } = weightsWithEscapes(5000, 8, 13, 12);
    const payload = encode(values, createCodebook(exponents), { chunkSize: 64 });
    const meta = readPayloadMeta(payload);
    const segments = computeSegmentDigests(payload, meta, 0, 1);
    const from = meta.layout.escapeIndex.offsetBytes;
    const spots = [...Array(256).keys()].filter((at) => at < 252 && at !== 4 && at !== 5);
    for (let at = from; at < meta.layout.totalBytes; at++) spots.push(at);
    for (const at of spots) {
      const bad = payload.slice();
      bad[at]! ^= 1 << (at & 7);
      const code = codeOf(() => verifyOuterDigests(bad, meta, segments, computeOuterDigests(bad, meta)));
      if (code !== 'CHECKSUM_MISMATCH') expect.fail(`flip at ${at}: ${code}`);
    }
    // A wrong segment digest fails it too.
    const wrong = segments.slice();
    wrong[3]! ^= 1;
    expect(codeOf(() => verifyOuterDigests(payload, meta, wrong, computeOuterDigests(payload, meta)))).toBe('CHECKSUM_MISMATCH');
  });
});

describe('outer digest arguments', () => {
  const { values, exponents } = weightsWithEscapes(S + 5, 1, 50, 12);
  const payload = encode(values, createCodebook(exponents));
  const meta = readPayloadMeta(payload);
  const segments = computeSegmentDigests(payload, meta, 0, 2);
  const outer = computeOuterDigests(payload, meta);

  it('rejects older versions, short or wrong arrays with typed errors', () => {
    const old = referenceEncode(values.subarray(0, 100), exponents, 1024, 2);
    expect(codeOf(() => computeOuterDigests(old, readPayloadMeta(old)))).toBe('UNSUPPORTED_VERSION');
    expect(codeOf(() => combineOuterDigests(old, readPayloadMeta(old), new Uint32Array(6), outer))).toBe('UNSUPPORTED_VERSION');
    expect(codeOf(() => computeOuterDigests(payload, meta, new Uint32Array(3)))).toBe('OUTPUT_TOO_SMALL');
    expect(codeOf(() => combineOuterDigests(payload, meta, segments, new Uint32Array(5)))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => combineOuterDigests(payload, meta, segments.subarray(6), outer))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => combineOuterDigests(payload, meta, segments, [1, 2, 3, 4] as unknown as Uint32Array))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => computeOuterDigests(payload.subarray(0, 100), meta))).not.toBe('none');
  });
});
