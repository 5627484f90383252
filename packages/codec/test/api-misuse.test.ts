// API misuse at the boundary: each case a typed SplitZipError (never a hang, a bare TypeError or
// silently wrong values). Hermetic, in memory.
import { afterAll, describe, expect, it } from 'vitest';
import {
  createCodebook,
  createCodecArena,
  decode,
  decodeChunks,
  decodeRange,
  decodeSegments,
  encode,
  readPayloadMeta,
  setCodecBackend,
} from '../src/index.js';
import { prepareEscapes } from '../src/decode-core.js';
import { BACKENDS, codeOf, useBackend } from './backends.js';
import { weightsWithEscapes } from './fixtures.js';

afterAll(() => setCodecBackend('auto'));

const N = 20000;
const { values, exponents } = weightsWithEscapes(N, 11, 97, 12);
const codebook = createCodebook(exponents);

describe.each(BACKENDS)('overlapping inputs and outputs on the %s backend', (backend) => {
  it('decode, decodeRange, decodeChunks, decodeSegments: out overlapping the payload -> INVALID_ARGUMENT', () => {
    useBackend(backend);
    const p = encode(values, codebook);
    const meta = readPayloadMeta(p);
    const arena = createCodecArena(4 << 20);
    const places: [string, ArrayBuffer | ArrayBufferLike, number][] = [
      ['ordinary', new ArrayBuffer(p.length + 2 * N + 4096), 0],
      ['arena', arena.buffer, arena.allocate(p.length + 2 * N + 4096).byteOffset],
    ];
    for (const [, buffer, at] of places) {
      const payload = new Uint8Array(buffer, at, p.length);
      for (const shift of [0, 256, p.length - 256]) {
        const out = new Uint16Array(buffer, at + shift, N);
        payload.set(p);
        expect(codeOf(() => decode(payload, out, { verify: false }))).toBe('INVALID_ARGUMENT');
        payload.set(p);
        expect(codeOf(() => decode(payload, out))).toBe('INVALID_ARGUMENT');
        payload.set(p);
        expect(codeOf(() => decodeRange(payload, 0, N, out, { verify: false }))).toBe('INVALID_ARGUMENT');
        payload.set(p);
        expect(codeOf(() => decodeChunks(payload, meta, 0, meta.chunkCount, out))).toBe('INVALID_ARGUMENT');
        payload.set(p);
        expect(codeOf(() => decodeSegments(payload, meta, 0, 1, out))).toBe('INVALID_ARGUMENT');
      }
      // Adjacent (not overlapping) is fine.
      payload.set(p);
      const after = new Uint16Array(buffer, at + p.length, N);
      expect(Array.from(decode(payload, after, { verify: false }))).toEqual(Array.from(values));
      // out may be longer than the tensor: only the values written count.
      const before = new Uint16Array(buffer, at, (p.length >> 1) + N);
      const payloadAfter = new Uint8Array(buffer, at + 2 * N, p.length);
      payloadAfter.set(p);
      expect(codeOf(() => decode(payloadAfter, before.subarray(0, N)))).toBe('none');
    }
  });
});

describe.each(BACKENDS)('encode into an out overlapping values on the %s backend', (backend) => {
  it('-> INVALID_ARGUMENT "out overlaps values", ordinary arrays and arena views', () => {
    useBackend(backend);
    const arena = createCodecArena(4 << 20);
    const bytes = 2 * N + 65536;
    for (const region of [new Uint8Array(bytes), arena.allocate(bytes)]) {
      for (const [valuesAt, outAt] of [[0, 0], [0, 2 * N - 256], [4096, 0]] as const) {
        const vals = new Uint16Array(region.buffer, region.byteOffset + valuesAt, N);
        vals.set(values);
        const out = region.subarray(outAt);
        let error: unknown;
        try {
          encode(vals, codebook, { out });
        } catch (e) {
          error = e;
        }
        expect((error as { code?: string })?.code).toBe('INVALID_ARGUMENT');
        expect(String((error as Error).message)).toContain('out overlaps values');
      }
      // Disjoint halves of one buffer are fine.
      const vals = new Uint16Array(region.buffer, region.byteOffset, N);
      vals.set(values);
      const payload = encode(vals, codebook, { out: region.subarray(2 * N) });
      expect(Array.from(decode(payload.slice()))).toEqual(Array.from(values));
    }
  });
});

describe('escape patcher', () => {
  it('never runs past escape_count when the in-place escape index changes under it', () => {
    const p = encode(values, codebook, { chunkSize: 64 });
    const meta = readPayloadMeta(p);
    const out = new Uint16Array(N);
    const escapes = prepareEscapes(p, meta, 0, N, out, 0);
    expect(escapes.error).toBeNull();
    // Overwrite a later chunk's index end (as a decode into overlapping memory would).
    const index = new DataView(p.buffer, p.byteOffset + meta.layout.escapeIndex.offsetBytes);
    let chunk = 1;
    while (index.getUint32(4 * (chunk + 1), true) === index.getUint32(4 * chunk, true)) chunk++;
    const realEnd = index.getUint32(4 * (chunk + 1), true);
    index.setUint32(4 * (chunk + 1), meta.escapeCount + 2 ** 27, true);
    // ... and the positions after it (read as position 0 of that chunk, below the limit).
    p.fill(0, meta.layout.escapePositions.offsetBytes + 2 * realEnd);
    const t = performance.now();
    escapes.apply(N);
    expect(performance.now() - t).toBeLessThan(100);
  });
});
