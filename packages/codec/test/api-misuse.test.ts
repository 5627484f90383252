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
  SplitZipError,
} from '../src/index.js';
import { activeKernels } from '../src/backend.js';
import { prepareEscapes } from '../src/decode-core.js';
import {
  attachCodecArena,
  computePayloadLayout,
  computeSegmentSpans,
  countExponents,
  createPayloadWriter,
  readEscapeStreams,
  validatePayloadStructure,
  type EscapeStreams,
  type PayloadLayout,
} from '../src/index.js';
import { vi } from 'vitest';
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

describe('views over an arena\'s reserved bytes (the kernels\' scratch areas)', () => {
  it('decode, encode, countExponents -> INVALID_ARGUMENT naming the argument; later decodes stay right', () => {
    setCodecBackend('auto');
    const p = encode(values, codebook);
    for (const threads of [0, 2]) {
      const arena = createCodecArena(1 << 20, { threads });
      const pay = arena.allocate(p.length);
      pay.set(p);
      const good = arena.allocateValues(N);
      expect(Array.from(decode(pay, good))).toEqual(Array.from(values));
      const reserved = pay.byteOffset; // the first allocation starts where the reserved bytes end
      for (const at of [0, reserved - 256, reserved - 2]) {
        const scratchView = new Uint16Array(arena.buffer, at, N);
        let error: unknown;
        try {
          decode(pay, scratchView);
        } catch (e) {
          error = e;
        }
        expect((error as { code?: string }).code).toBe('INVALID_ARGUMENT');
        expect((error as { details: { argument: string } }).details.argument).toBe('out');
        expect(codeOf(() => decodeRange(pay, 0, N, scratchView))).toBe('INVALID_ARGUMENT');
        expect(codeOf(() => countExponents(new Uint16Array(arena.buffer, at, 2048)))).toBe('INVALID_ARGUMENT');
        expect(codeOf(() => countExponents(new Uint16Array(arena.buffer, at, 16)))).toBe('INVALID_ARGUMENT');
        expect(codeOf(() => encode(new Uint16Array(arena.buffer, at, N), codebook))).toBe('INVALID_ARGUMENT');
        expect(codeOf(() => encode(values, codebook, { out: new Uint8Array(arena.buffer, at, p.length) }))).toBe('INVALID_ARGUMENT');
      }
      // The cached decode tables were not touched: valid decodes in this arena are still right.
      expect(Array.from(decode(pay, good))).toEqual(Array.from(values));
      expect(Array.from(decode(pay))).toEqual(Array.from(values));
      expect(Array.from(pay)).toEqual(Array.from(p));
      if (threads > 0) {
        // An attached thread's kernels refuse every thread's scratch area, not only their own.
        const share = arena.share(1);
        expect(share.reservedBytes).toBe(reserved);
        attachCodecArena(share);
        expect(codeOf(() => decode(pay, new Uint16Array(arena.buffer, 0, N)))).toBe('INVALID_ARGUMENT');
      }
    }
  });

  it('encode whose two passes disagree on the escape count retries once, then throws a typed error', () => {
    setCodecBackend('auto');
    const kernels = activeKernels();
    const spy = vi.spyOn(kernels, 'countEscapes').mockReturnValue(3);
    try {
      let error: unknown;
      try {
        encode(values, codebook);
      } catch (e) {
        error = e;
      }
      expect((error as { code?: string }).code).toBe('INVALID_ARGUMENT');
      expect(spy).toHaveBeenCalledTimes(2);
      // A wrong hint alone costs one more pass, not an error.
      spy.mockRestore();
      expect(Array.from(decode(encode(values, codebook, { escapeCount: 3 })))).toEqual(Array.from(values));
    } finally {
      spy.mockRestore();
    }
  });
});

describe('a meta that is not this payload\'s', () => {
  it('decodeChunks and decodeSegments -> INVALID_ARGUMENT for a meta of another payload or an edited one', () => {
    setCodecBackend('auto');
    const n = 10000;
    const a = values.subarray(0, n);
    const b = a.map((x) => x ^ 0x0080); // same shape, other exponents
    const pa = encode(a, createCodebook(exponents));
    const pb = encode(b, createCodebook(exponents.map((e) => e ^ 1)));
    const metaA = readPayloadMeta(pa);
    const metaB = readPayloadMeta(pb);
    expect(metaA.layout).toEqual(metaB.layout); // self-consistent and fits pb: only the header tells
    const out = new Uint16Array(n);
    const cases = [
      metaA,
      { ...metaB, codebook: metaA.codebook },
      { ...metaB, checksum: (metaB.checksum + 1) >>> 0 },
      { ...metaB, version: 2 },
    ];
    for (const meta of cases) {
      expect(codeOf(() => decodeChunks(pb, meta, 0, meta.chunkCount, out))).toBe('INVALID_ARGUMENT');
      if (meta.version === 3) expect(codeOf(() => decodeSegments(pb, meta, 0, 1, out))).toBe('INVALID_ARGUMENT');
    }
    // Its own meta decodes.
    decodeChunks(pb, metaB, 0, metaB.chunkCount, out);
    expect(Array.from(out)).toEqual(Array.from(b));
    decodeSegments(pb, metaB, 0, 1, out);
    expect(Array.from(out)).toEqual(Array.from(b));
  });
});

describe('small argument misuses -> typed errors', () => {
  it('createCodecArena(n, null) is the default arena; a non-object options is INVALID_ARGUMENT', () => {
    expect(createCodecArena(1024, null).threads).toBe(0);
    expect(codeOf(() => createCodecArena(1024, 5 as unknown as object))).toBe('INVALID_ARGUMENT');
  });

  it('validatePayloadStructure with null / {} / short streams -> INVALID_ARGUMENT', () => {
    const p = encode(values, codebook);
    const meta = readPayloadMeta(p);
    const streams = readEscapeStreams(p, meta);
    for (const bad of [null, {}, { ...streams, index: streams.index.subarray(1) }, { ...streams, positions: new Uint16Array(0) }]) {
      expect(codeOf(() => validatePayloadStructure(p, meta, bad as unknown as EscapeStreams))).toBe('INVALID_ARGUMENT');
    }
    expect(codeOf(() => validatePayloadStructure(p, meta, streams))).toBe('none');
  });

  it('computeSegmentSpans(null) and a bad segment -> INVALID_ARGUMENT', () => {
    const layout = computePayloadLayout(N, 0);
    expect(codeOf(() => computeSegmentSpans(null as unknown as PayloadLayout, 0))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => computeSegmentSpans({} as unknown as PayloadLayout, 0))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => computeSegmentSpans(layout, -1))).toBe('INVALID_ARGUMENT');
    expect(computeSegmentSpans(layout, 0).codes).toBe(layout.codes.offsetBytes);
  });

  it('computeSegmentSpans past the last segment -> INVALID_ARGUMENT (its spans ran past totalBytes)', () => {
    const layout = computePayloadLayout(5000, 0);
    expect(computeSegmentSpans(layout, 0).smEnd).toBeLessThanOrEqual(layout.totalBytes);
    for (const k of [1, 1e9]) expect(codeOf(() => computeSegmentSpans(layout, k))).toBe('INVALID_ARGUMENT');
    expect(() => computeSegmentSpans(layout, 1)).toThrow(/segment 1 is out of range: it must be an integer in 0\.\.0/);
    expect(() => computeSegmentSpans(computePayloadLayout(0, 0), 0)).toThrow(/INVALID_ARGUMENT: .*a layout of 0 values has no segments/);
  });

  it('createPayloadWriter too large to allocate -> INVALID_ARGUMENT with totalBytes', () => {
    let error: unknown;
    try {
      createPayloadWriter(2 ** 32 - 1, 0, codebook);
    } catch (e) {
      error = e;
    }
    expect((error as { code?: string }).code).toBe('INVALID_ARGUMENT');
    expect((error as { details: { totalBytes: number } }).details.totalBytes).toBe(computePayloadLayout(2 ** 32 - 1, 0).totalBytes);
  });

  it('decodeChunks / decodeSegments without out -> INVALID_ARGUMENT', () => {
    const p = encode(values, codebook);
    const meta = readPayloadMeta(p);
    expect(codeOf(() => decodeChunks(p, meta, 0, 1, undefined as unknown as Uint16Array))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => decodeSegments(p, meta, 0, 1, undefined as unknown as Uint16Array))).toBe('INVALID_ARGUMENT');
  });

  it('encode of a detached Uint16Array -> INVALID_ARGUMENT (an empty one still encodes)', () => {
    const vals = values.slice(0, 100);
    structuredClone(vals.buffer, { transfer: [vals.buffer] });
    expect(codeOf(() => encode(vals, codebook))).toBe('INVALID_ARGUMENT');
    expect(readPayloadMeta(encode(new Uint16Array(0), codebook)).elementCount).toBe(0);
    expect(readPayloadMeta(encode(new Uint16Array(new SharedArrayBuffer(0)), codebook)).elementCount).toBe(0);
  });
});

describe('unknown option keys -> INVALID_ARGUMENT naming the key (they gave the defaults silently)', () => {
  const detailOf = (fn: () => unknown): Record<string, unknown> | undefined => {
    try {
      fn();
    } catch (error) {
      return error instanceof SplitZipError ? error.details : undefined;
    }
    return undefined;
  };

  it('encode: a misspelt chunkSize is refused with a suggestion, not encoded at the default 1024', () => {
    expect(() => encode(values, codebook, { chunksize: 4096 } as never)).toThrow(/unknown option "chunksize": did you mean "chunkSize"\?/);
    expect(detailOf(() => encode(values, codebook, { chunk: 4096 } as never))).toMatchObject({ option: 'chunk' });
    // Known keys, undefined-valued ones included, still work.
    expect(readPayloadMeta(encode(values, codebook, { chunkSize: 4096, escapeCount: undefined, out: undefined })).chunkSize).toBe(4096);
  });

  it('a huge unknown key is shown cut (60 characters in the message, 200 in details), not whole', () => {
    const key = `k${'x'.repeat(1_000_000)}`;
    let message = '';
    try {
      encode(values, codebook, { [key]: 1 } as never);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/unknown option "kxxx+\.\.\."/);
    expect(message.length).toBeLessThan(300);
    expect(String(detailOf(() => encode(values, codebook, { [key]: 1 } as never))?.option).length).toBeLessThanOrEqual(203);
  });

  it('decode, decodeRange, decodeSegments, createCodecArena: the same rule', () => {
    const p = encode(values, codebook);
    const meta = readPayloadMeta(p);
    expect(() => decode(p, undefined, { verfy: false } as never)).toThrow(/did you mean "verify"\?/);
    expect(codeOf(() => decodeRange(p, 0, 1, undefined, { check: false } as never))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => decodeSegments(p, meta, 0, 1, new Uint16Array(N), { digest: new Uint32Array(64) } as never))).toBe('INVALID_ARGUMENT');
    expect(() => createCodecArena(1024, { thread: 2 } as never)).toThrow(/did you mean "threads"\?/);
    // An inherited key is not the caller's: only own keys are checked.
    expect(decode(p, undefined, Object.create({ stray: 1 }) as object)).toEqual(values);
  });

  it("decode, decodeRange: verify must be a boolean ('false' verified, unlike what its caller meant)", () => {
    const p = encode(values, codebook);
    for (const verify of ['false', 0, null]) {
      expect(codeOf(() => decode(p, undefined, { verify } as never))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => decodeRange(p, 0, 1, undefined, { verify } as never))).toBe('INVALID_ARGUMENT');
    }
    expect(decode(p, undefined, { verify: undefined })).toEqual(values);
  });

  it('createCodecArena: a null or fractional thread count is refused (null was the default arena)', () => {
    expect(codeOf(() => createCodecArena(1024, { threads: null } as never))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => createCodecArena(1024, { threads: 1.5 }))).toBe('INVALID_ARGUMENT');
    expect(createCodecArena(1024, { threads: undefined }).threads).toBe(0);
  });
});

describe('createXxh32Stream', () => {
  it('gives the XXH32 of the bytes whatever the pieces, seeds included', async () => {
    const { createXxh32Stream, xxh32 } = await import('../src/index.js');
    const bytes = new Uint8Array(1000);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff;
    for (const seed of [0, 1, 0xffffffff]) {
      for (const length of [0, 1, 15, 16, 17, 255, 256, 1000]) {
        for (const cut of [1, 5, 16, 33, 256, 1000]) {
          const stream = createXxh32Stream(seed);
          for (let at = 0; at < length; at += cut) stream.update(bytes.subarray(at, Math.min(length, at + cut)));
          expect(stream.digest(), `${length} bytes in pieces of ${cut}, seed ${seed}`).toBe(xxh32(bytes.subarray(0, length), seed));
        }
      }
    }
  });

  it('refuses a bad seed, a non-Uint8Array and use after digest (INVALID_ARGUMENT)', async () => {
    const { createXxh32Stream } = await import('../src/index.js');
    expect(codeOf(() => createXxh32Stream(-1))).toBe('INVALID_ARGUMENT');
    const stream = createXxh32Stream();
    expect(codeOf(() => stream.update([1, 2] as unknown as Uint8Array))).toBe('INVALID_ARGUMENT');
    stream.digest();
    expect(codeOf(() => stream.update(new Uint8Array(1)))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => stream.digest())).toBe('INVALID_ARGUMENT');
  });
});
