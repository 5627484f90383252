// The decoders patch escapes block by block as the kernels report values written (so each patch
// hits a line still in cache). These cases put escapes on every edge of that hand-off: a block's
// first and last value, chunks larger than a block (65,536 values: one chunk's escapes patched in
// two reports), ranges that start or end inside a chunk or a block, and segment-split decodes.
// Every result is compared with the scalar reference decoder.
import { afterAll, describe, expect, it } from 'vitest';
import {
  calibrateCodebook,
  computeSegmentDigests,
  createCodebook,
  createCodecArena,
  decode,
  decodeChunks,
  decodeRange,
  decodeSegments,
  encode,
  readPayloadMeta,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  setCodecBackend,
} from '../src/index.js';
import { BACKENDS, codeOf, useBackend } from './backends.js';
import { gaussianBf16, referenceDecode, valuesWithExponents } from './reference.js';
import { sameBytes, weightsWithEscapes } from './fixtures.js';

afterAll(() => setCodecBackend('auto'));

/**
 * The kernels' block length (values; 4 of them a call when payload and output are both in an
 * arena); escapes are placed on and around its multiples.
 */
const BLOCK = 32768;

/**
 * Gaussian weights with a 13-exponent codebook calibrated before escapes go in: every 7th value,
 * each block edge and both ends get an exponent outside it (about 1 value in 6 escapes).
 */
function edgeFixture(n: number, seed: number): { values: Uint16Array; exponents: number[] } {
  const values = gaussianBf16(n, 0.02, seed);
  const exponents = calibrateCodebook(values).codebook.exponents.slice(0, 13);
  const odd = valuesWithExponents(4096, [2, 201, 251], seed + 5);
  const edges = [0, 1, n - 2, n - 1];
  for (let i = 3; i < n; i += 7) edges.push(i);
  for (let b = BLOCK; b < n; b += BLOCK) edges.push(b - 2, b - 1, b, b + 1);
  edges.forEach((i, k) => {
    if (i >= 0 && i < n) values[i] = odd[k % odd.length]!;
  });
  return { values, exponents };
}

describe.each(BACKENDS)('escape patching on the %s backend', (backend) => {
  const n = 3 * BLOCK + 12345; // not a multiple of 2, 4, a group, a chunk or a block

  it.each([
    [64, n],
    [1024, n],
    [65536, n],
    [1024, 9 * BLOCK + 4321], // several in-place calls of 4 blocks
  ])('whole decodes, verified and not, ordinary arrays and arena views (chunk size %i, %i values)', (chunkSize, n) => {
    useBackend(backend);
    const { values, exponents } = edgeFixture(n, chunkSize);
    const payload = encode(values, createCodebook(exponents), { chunkSize });
    expect(readPayloadMeta(payload).escapeCount).toBeGreaterThan(n / 8);
    expect(sameBytes(referenceDecode(payload), values)).toBe(true);
    expect(sameBytes(decode(payload), values)).toBe(true);
    expect(sameBytes(decode(payload, undefined, { verify: false }), values)).toBe(true);

    const arena = createCodecArena(4 * n + (1 << 20));
    const slot = arena.allocate(payload.length);
    slot.set(payload);
    const out = arena.allocateValues(n);
    for (const verify of [true, false]) {
      out.fill(0xffff);
      decode(slot, out, { verify });
      expect(sameBytes(out, values)).toBe(true);
    }
  });

  it.each([64, 1024, 65536])('ranges that start and end inside chunks and blocks (chunk size %i)', (chunkSize) => {
    useBackend(backend);
    const n = 9 * BLOCK + 4321;
    const { values, exponents } = edgeFixture(n, chunkSize + 1);
    const payload = encode(values, createCodebook(exponents), { chunkSize });
    const arena = createCodecArena(2 * n + payload.length + (1 << 20));
    const slot = arena.allocate(payload.length);
    slot.set(payload);
    const out = arena.allocateValues(n);
    const starts = [0, 1, 33, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK - 3, 65536 + 7, 4 * BLOCK - 1, 4 * BLOCK + 3];
    const counts = [1, 2, 31, BLOCK - 1, BLOCK, BLOCK + 2, 2 * BLOCK + 5, 4 * BLOCK + 1, 5 * BLOCK - 7];
    for (const start of starts) {
      for (const count of counts) {
        if (start + count > n) continue;
        const expected = values.subarray(start, start + count);
        if (!sameBytes(decodeRange(payload, start, count), expected)) expect.fail(`decodeRange(${start}, ${count})`);
        const view = out.subarray(0, count).fill(0xffff);
        decodeRange(slot, start, count, view);
        if (!sameBytes(view, expected)) expect.fail(`arena decodeRange(${start}, ${count})`);
      }
    }
    const meta = readPayloadMeta(payload);
    for (const [first, count] of [[0, 1], [1, 1], [meta.chunkCount - 2, 2]] as const) {
      const from = first * chunkSize;
      const to = Math.min(n, (first + count) * chunkSize);
      const chunkOut = new Uint16Array(to - from);
      decodeChunks(payload, meta, first, count, chunkOut);
      expect(sameBytes(chunkOut, values.subarray(from, to))).toBe(true);
    }
  });

  it('segment decodes with digests, whole and split, in place and not', () => {
    useBackend(backend);
    const size = 2 * SEGMENT_VALUES + 40001;
    const { values, exponents } = weightsWithEscapes(size, 77, 5, 12);
    const payload = encode(values, createCodebook(exponents), { chunkSize: 65536 });
    const meta = readPayloadMeta(payload);
    expect(meta.escapeCount).toBeGreaterThan(size / 5); // every 5th value, and the codebook's cut
    const expectedDigests = computeSegmentDigests(payload, meta, 0, 3);
    const arena = createCodecArena(2 * size + payload.length + (1 << 20));
    const slot = arena.allocate(payload.length);
    slot.set(payload);
    const arenaOut = arena.allocateValues(size);
    for (const [source, target] of [
      [payload, new Uint16Array(size)],
      [slot, arenaOut],
    ] as const) {
      for (const [first, end] of [[0, 3], [0, 1], [1, 3], [2, 3]] as const) {
        const from = first * SEGMENT_VALUES;
        const to = Math.min(size, end * SEGMENT_VALUES);
        const view = target.subarray(0, to - from).fill(0xffff);
        const digests = new Uint32Array(SEGMENT_DIGESTS * (end - first));
        decodeSegments(source, meta, first, end, view, { digests });
        if (!sameBytes(view, values.subarray(from, to))) expect.fail(`segments [${first}, ${end})`);
        expect(sameBytes(digests, expectedDigests.subarray(SEGMENT_DIGESTS * first, SEGMENT_DIGESTS * end))).toBe(true);
      }
    }
  });

  it('payloads whose escape index is not 4-byte aligned in memory (read through a copy)', () => {
    useBackend(backend);
    const { values, exponents } = edgeFixture(n, 9);
    const payload = encode(values, createCodebook(exponents), { chunkSize: 1024 });
    for (const shift of [1, 2, 3]) {
      const holder = new Uint8Array(payload.length + shift);
      holder.set(payload, shift);
      const shifted = holder.subarray(shift);
      expect(sameBytes(decode(shifted), values)).toBe(true);
      expect(sameBytes(decode(shifted, undefined, { verify: false }), values)).toBe(true);
      expect(sameBytes(decodeRange(shifted, BLOCK - 3, BLOCK + 7), values.subarray(BLOCK - 3, 2 * BLOCK + 4))).toBe(true);
      const meta = readPayloadMeta(shifted);
      const broken = shifted.slice();
      new DataView(broken.buffer).setUint32(meta.layout.escapeIndex.offsetBytes + 4 * 40, 0, true);
      const again = new Uint8Array(broken.length + shift);
      again.set(broken, shift);
      expect(codeOf(() => decode(again.subarray(shift), undefined, { verify: false }))).toBe('BAD_ESCAPE_INDEX');
    }
  });

  it('a broken escape index is reported after the checksum, and nothing is patched out of range', () => {
    useBackend(backend);
    const { values, exponents } = edgeFixture(n, 3);
    const payload = encode(values, createCodebook(exponents), { chunkSize: 1024 });
    const meta = readPayloadMeta(payload);
    const at = meta.layout.escapeIndex.offsetBytes + 4 * 40; // chunk 39's end, now before its start
    const broken = payload.slice();
    new DataView(broken.buffer).setUint32(at, 0, true);
    // The checksum no longer matches: that is what a verified decode reports first.
    expect(codeOf(() => decode(broken))).toBe('CHECKSUM_MISMATCH');
    // Unverified (and with an arena output guarded on both sides), the escape rule fails and
    // no write lands outside out.
    const arena = createCodecArena(2 * n + broken.length + (1 << 20));
    const slot = arena.allocate(broken.length);
    slot.set(broken);
    const guarded = arena.allocateValues(n + 2048).fill(0x5a5a);
    const out = guarded.subarray(1024, 1024 + n);
    expect(codeOf(() => decode(slot, out, { verify: false }))).toBe('BAD_ESCAPE_INDEX');
    expect(guarded.subarray(0, 1024).every((v) => v === 0x5a5a)).toBe(true);
    expect(guarded.subarray(1024 + n).every((v) => v === 0x5a5a)).toBe(true);
  });
});
