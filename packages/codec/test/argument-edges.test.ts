// Arguments a caller can get wrong in ways that look right: arrays from another realm, views that
// cannot be read, SharedArrayBuffers that are one memory under two objects, options that are not
// objects, sizes past what the engine can allocate. Each is a correct result or a typed
// SplitZipError, never wrong values, a silent default or a bare TypeError/RangeError.
import { runInNewContext } from 'node:vm';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import {
  calibrateCodebook,
  computeSegmentDigests,
  convertPayloadVersion,
  countExponents,
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
import { BACKENDS, codeOf, useBackend } from './backends.js';
import { sameBytes, weightsWithEscapes } from './fixtures.js';
import { referenceDecode } from './reference.js';

afterAll(() => setCodecBackend('auto'));

const N = 5003;
const { values, exponents } = weightsWithEscapes(N, 5, 41, 14);
const codebook = createCodebook(exponents);

/** The SplitZipError `fn` throws (fails the test if it returns or throws something else). */
function errorOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (error) {
    if (typeof (error as { code?: unknown }).code === 'string') return error as { code: string; message: string };
    throw error;
  }
  throw new Error('expected a SplitZipError, got a result');
}

describe.each(BACKENDS)('on the %s backend', (backend) => {
  it("takes another realm's typed arrays (vm context, iframe) as its own", () => {
    useBackend(backend);
    const foreign = runInNewContext('new Uint16Array(n)', { n: N }) as Uint16Array;
    foreign.set(values);
    expect(foreign instanceof Uint16Array).toBe(false);
    const payload = encode(foreign, codebook);
    expect(sameBytes(payload, encode(values, codebook))).toBe(true);
    const foreignPayload = runInNewContext('new Uint8Array(n)', { n: payload.length }) as Uint8Array;
    foreignPayload.set(payload);
    const foreignOut = runInNewContext('new Uint16Array(n)', { n: N }) as Uint16Array;
    expect(sameBytes(decode(foreignPayload, foreignOut), values)).toBe(true);
    expect(readPayloadMeta(foreignPayload).elementCount).toBe(N);
    expect(calibrateCodebook(foreign).codebook.exponents).toEqual(calibrateCodebook(values).codebook.exponents);
  });

  it('refuses look-alikes: a Proxy of a typed array, a DataView, a tagged plain object', () => {
    useBackend(backend);
    const payload = encode(values, codebook);
    const fakes: unknown[] = [new Proxy(values, {}), new DataView(values.buffer), { [Symbol.toStringTag]: 'Uint16Array', length: 4 }];
    for (const fake of fakes) {
      expect(codeOf(() => encode(fake as Uint16Array, codebook))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => countExponents(fake as Uint16Array))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => decode(payload, fake as Uint16Array))).toBe('INVALID_ARGUMENT');
    }
    expect(codeOf(() => decode(new Proxy(payload, {}) as Uint8Array))).toBe('INVALID_ARGUMENT');
  });

  it('a view whose buffer was detached is INVALID_ARGUMENT everywhere, not an empty tensor or a short payload', () => {
    useBackend(backend);
    const detach = <T extends Uint8Array | Uint16Array>(view: T): T => {
      structuredClone(view.buffer, { transfer: [view.buffer as ArrayBuffer] });
      return view;
    };
    const payload = encode(values, codebook);
    expect(errorOf(() => calibrateCodebook(detach(values.slice())))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('detached') });
    expect(codeOf(() => countExponents(detach(values.slice())))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => encode(detach(values.slice()), codebook))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => encode(values, codebook, { out: detach(new Uint8Array(payload.length)) }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => readPayloadMeta(detach(payload.slice())))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => decode(detach(payload.slice())))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => decode(payload, detach(new Uint16Array(N))))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => decodeRange(payload, 0, 1, detach(new Uint16Array(N))))).toBe('INVALID_ARGUMENT');
  });

  it('a view left past the end of a shrunk resizable buffer is INVALID_ARGUMENT (it reads as empty)', () => {
    useBackend(backend);
    // Resizable buffers are ES2024 (Node 20 has them); this package's lib is ES2022.
    const Resizable = ArrayBuffer as unknown as new (bytes: number, options: { maxByteLength: number }) => ArrayBuffer & { resize(bytes: number): void };
    const rab = new Resizable(2 * N + 64, { maxByteLength: 4 * N });
    const view = new Uint16Array(rab, 64, N);
    view.set(values);
    rab.resize(32);
    expect(view.length).toBe(0);
    expect(codeOf(() => encode(view, codebook))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => calibrateCodebook(view))).toBe('INVALID_ARGUMENT');
    // An empty view that is in bounds is an empty tensor, as before.
    const empty = new Uint16Array(rab, 32, 0);
    expect(readPayloadMeta(encode(empty, codebook)).elementCount).toBe(0);
    expect(calibrateCodebook(empty).coverage).toBe(1);
  });

  it('two SharedArrayBuffer objects over one memory: an overlapping out is INVALID_ARGUMENT, the payload untouched', () => {
    useBackend(backend);
    const p = encode(values, codebook);
    const sab = new SharedArrayBuffer(p.length + 2 * N + 4096);
    const alias = structuredClone(sab);
    expect(alias).not.toBe(sab);
    const payload = new Uint8Array(sab, 0, p.length);
    payload.set(p);
    for (const shift of [0, 256, p.length - 256]) {
      const out = new Uint16Array(alias, shift, N);
      expect(codeOf(() => decode(payload, out))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => decode(payload, out, { verify: false }))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => decodeRange(payload, 0, N, out))).toBe('INVALID_ARGUMENT');
      expect(sameBytes(payload, p)).toBe(true);
    }
    // A second memory at the same offsets is not an overlap.
    const other = new Uint16Array(new SharedArrayBuffer(sab.byteLength), 0, N);
    expect(sameBytes(decode(payload, other), referenceDecode(p))).toBe(true);
    expect(sameBytes(payload, p)).toBe(true);
    // encode: values in one object, out over the same bytes through the other.
    const valuesIn = new Uint16Array(alias, 0, N);
    valuesIn.set(values);
    expect(codeOf(() => encode(valuesIn, codebook, { out: new Uint8Array(sab, 512, p.length) }))).toBe('INVALID_ARGUMENT');
    expect(sameBytes(valuesIn, values)).toBe(true);
  });
});

describe('options', () => {
  const payload = encode(values, codebook);
  it('options that are not objects are INVALID_ARGUMENT, not silently the defaults', () => {
    for (const bad of [4096, 'verify', true]) {
      expect(codeOf(() => encode(values, codebook, bad as never))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => decode(payload, undefined, bad as never))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => decodeRange(payload, 0, 1, undefined, bad as never))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => decodeSegments(payload, readPayloadMeta(payload), 0, 1, new Uint16Array(N), bad as never))).toBe('INVALID_ARGUMENT');
    }
    // null and undefined mean no options.
    expect(sameBytes(encode(values, codebook, null), payload)).toBe(true);
    expect(sameBytes(decode(payload, undefined, null), values)).toBe(true);
  });

  it('a null chunkSize is refused like a null escapeCount; undefined is the default', () => {
    expect(codeOf(() => encode(values, codebook, { chunkSize: null as never }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => encode(values, codebook, { escapeCount: null as never }))).toBe('INVALID_ARGUMENT');
    expect(sameBytes(encode(values, codebook, { chunkSize: undefined }), payload)).toBe(true);
  });

  it("decodeRange names a non-number start or count by its type ('5' is not 5)", () => {
    expect(errorOf(() => decodeRange(payload, '5' as never, 1)).message).toContain("string \"5\"");
    expect(errorOf(() => decodeRange(payload, 0, N + 1)).message).toContain(`outside the payload's ${N} values`);
  });

  it('a BigInt, Symbol, null-prototype object or cyclic object as a count, bound, version or backend is a SplitZipError naming it, not a TypeError', () => {
    const meta = readPayloadMeta(payload);
    const out = new Uint16Array(N);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const cases: [unknown, string][] = [
      [10n, 'bigint 10n'],
      [Symbol('s'), 'symbol Symbol(s)'],
      [Object.create(null), 'object [null prototype]'],
      [cyclic, 'object [object Object]'],
      [{ a: 1 }, 'object {"a":1}'],
    ];
    for (const [bad, shown] of cases) {
      const calls: (() => unknown)[] = [
        () => decodeRange(payload, bad as never, 2),
        () => decodeRange(payload, 0, bad as never),
        () => decodeChunks(payload, meta, bad as never, 1, out),
        () => decodeChunks(payload, meta, 0, bad as never, out),
        () => decodeSegments(payload, meta, bad as never, 1, out),
        () => computeSegmentDigests(payload, meta, 0, bad as never),
        () => convertPayloadVersion(payload, bad as never),
        () => setCodecBackend(bad as never),
      ];
      for (const call of calls) {
        const error = errorOf(call);
        expect(error.code).toBe('INVALID_ARGUMENT');
        expect(error.message).toContain(shown);
      }
    }
  });

  // A typed array of 2^24 values as a start took 12.8 s to be JSON'd into the message; a huge
  // BigInt or Symbol description was shown whole (a 200 KB message).
  it('a large array, typed array, BigInt or Symbol is shown short: tag and length, or cut to 60 characters', () => {
    const cases: [unknown, string][] = [
      [new Uint16Array(1 << 24), 'object [object Uint16Array] of length 16777216'],
      [new Array(100_000).fill(7), 'object [object Array] of length 100000'],
      [10n ** 5000n, `bigint 1${'0'.repeat(56)}...`],
      [Symbol('y'.repeat(10_000)), `symbol Symbol(${'y'.repeat(50)}...`],
    ];
    for (const [bad, shown] of cases) {
      const { message } = errorOf(() => decodeRange(payload, bad as never, 2));
      expect(message).toContain(shown);
      expect(message.length).toBeLessThan(200);
    }
  });

  it("convertPayloadVersion(p, '2') says the version must be a number, not that version 2 cannot be converted to", () => {
    const { message } = errorOf(() => convertPayloadVersion(payload, '2' as never));
    expect(message).toContain('version must be the number 1, 2 or 3, got string "2"');
    expect(errorOf(() => convertPayloadVersion(payload, 4)).message).toContain('cannot convert to format version 4 (only 1, 2, 3)');
  });
});

describe('shared arenas', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });
  it('without SharedArrayBuffer or on a page without cross-origin isolation: INVALID_ARGUMENT, not a ReferenceError', () => {
    vi.stubGlobal('SharedArrayBuffer', undefined);
    expect(errorOf(() => createCodecArena(1 << 16, { threads: 1 })).message).toContain('cross-origin');
    vi.unstubAllGlobals();
    vi.stubGlobal('crossOriginIsolated', false);
    expect(codeOf(() => createCodecArena(1 << 16, { threads: 1 }))).toBe('INVALID_ARGUMENT');
    // A private arena needs neither.
    expect(createCodecArena(1 << 16).threads).toBe(0);
  });
  it('share() on a private arena says the arena is private', () => {
    expect(errorOf(() => createCodecArena(1 << 16).share(0)).message).toContain('private');
  });
});

describe('sizes past what the engine allocates', () => {
  it('a payload larger than the largest typed array is INVALID_ARGUMENT, not a bare RangeError', () => {
    // 2.9e9 values fit MAX_ELEMENT_COUNT, but their payload (~4.36e9 bytes) is more than V8's
    // largest Uint8Array (2^32 in Node 20). The values are never written: their pages stay the
    // shared zero page, so this costs address space, not memory.
    const n = 2_900_000_000;
    let big: Uint16Array;
    try {
      big = new Uint16Array(n);
    } catch {
      return; // an engine that cannot even hold the values has nothing to test here
    }
    const error = errorOf(() => encode(big, createCodebook([0]), { escapeCount: 0 }));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toContain('cannot allocate the payload');
  });
});

describe('result types (checked by `tsc`, run by the typecheck task)', () => {
  it('a new payload or output is typed as a plain ArrayBuffer view, one written into `out` as out', () => {
    // Blob, Response and crypto.subtle take only ArrayBuffer-backed views: without the overloads
    // these lines do not compile (Uint8Array<ArrayBufferLike> is not assignable).
    const payload: Uint8Array<ArrayBuffer> = encode(values, codebook);
    const decoded: Uint16Array<ArrayBuffer> = decode(payload);
    const range: Uint16Array<ArrayBuffer> = decodeRange(payload, 1, 2);
    const shared = new Uint16Array(new SharedArrayBuffer(2 * N));
    const intoShared: Uint16Array<SharedArrayBuffer> = decode(payload, shared);
    const sharedPayload: Uint8Array<SharedArrayBuffer> = encode(values, codebook, { out: new Uint8Array(new SharedArrayBuffer(payload.length)) });
    expect(new Blob([payload]).size).toBe(payload.length);
    expect(sameBytes(decoded, values) && sameBytes(intoShared, values) && sameBytes(range, values.subarray(1, 3))).toBe(true);
    expect(sameBytes(sharedPayload, payload)).toBe(true);
  });
});
