// Payloads in Node Buffers (as fs.readFile gives them) and other kinds of arrays: a Buffer's `slice` is a view, not a copy,
// so any code that copies with `slice` and then writes (or reads `.buffer`) acts on the caller's
// bytes. Before the fix, verifying a Buffer payload zeroed its stored checksum: a second verify failed.
import { describe, expect, it } from 'vitest';
import { Xxh32State } from '../src/xxh32.js';
import { calibrateCodebook, convertPayloadVersion, decode, encode, readEscapeStreams, readPayloadMeta, validatePayloadStructure, verifyPayloadChecksum, xxh32 } from '../src/index.js';
import { BACKENDS, codeOf, useBackend } from './backends.js';
import { createRandom, valuesWithExponents } from './reference.js';

/** Escape-heavy values: 40 exponents, so the escape sections are far from empty. */
function escapeyValues(n: number, seed: number): Uint16Array {
  return valuesWithExponents(n, Array.from({ length: 40 }, (_, i) => 100 + i), seed);
}

/** The payload in a Buffer at `offset` bytes into a larger pooled-style allocation. */
function inBuffer(payload: Uint8Array, offset: number): Buffer {
  const whole = Buffer.alloc(payload.length + offset + 13, 0xa5);
  const view = whole.subarray(offset, offset + payload.length);
  view.set(payload);
  return view;
}

describe.each(BACKENDS)('payloads in Node Buffers (%s)', (backend) => {
  const values = escapeyValues(5000, 3);
  const { codebook } = calibrateCodebook(values);
  const payload = encode(values, codebook, { chunkSize: 256 });

  it.each([0, 8, 3])('verify and decode leave a Buffer at offset %i untouched, again and again', (offset) => {
    useBackend(backend);
    const buffer = inBuffer(payload, offset);
    const before = Buffer.from(buffer);
    for (let round = 0; round < 3; round++) {
      verifyPayloadChecksum(buffer);
      verifyPayloadChecksum(buffer, readPayloadMeta(buffer));
      expect(decode(buffer)).toEqual(values);
      expect(decode(buffer, new Uint16Array(values.length), { verify: true })).toEqual(values);
    }
    expect(buffer.equals(before)).toBe(true);
    // The bytes around the view are not touched either.
    const whole = Buffer.from(buffer.buffer, buffer.byteOffset - offset, offset + buffer.length + 13);
    expect(whole.subarray(0, offset).every((b) => b === 0xa5)).toBe(true);
    expect(whole.subarray(offset + buffer.length).every((b) => b === 0xa5)).toBe(true);
  });

  it('reads the escape sections of a Buffer whose offset breaks their alignment', () => {
    useBackend(backend);
    const buffer = inBuffer(payload, 3);
    const meta = readPayloadMeta(buffer);
    const streams = readEscapeStreams(buffer, meta);
    const aligned = readEscapeStreams(new Uint8Array(payload), readPayloadMeta(payload));
    expect(Array.from(streams.index)).toEqual(Array.from(aligned.index));
    expect(Array.from(streams.positions)).toEqual(Array.from(aligned.positions));
    expect(meta.escapeCount).toBeGreaterThan(100);
  });

  it('convertPayloadVersion leaves a Buffer input as it was', () => {
    useBackend(backend);
    const buffer = inBuffer(payload, 8);
    const before = Buffer.from(buffer);
    for (const version of [1, 2, 3]) {
      const converted = convertPayloadVersion(buffer, version);
      expect(readPayloadMeta(converted).version).toBe(version);
      expect(decode(converted)).toEqual(values);
    }
    expect(buffer.equals(before)).toBe(true);
  });
});

describe('Xxh32State over a reused Buffer', () => {
  it('keeps its own copy of the last partial stripe: refilling the buffer before digest changes nothing', () => {
    const random = createRandom(9);
    const data = Uint8Array.from({ length: 1000 }, () => Math.floor(random() * 256));
    for (const length of [5, 16, 37, 999]) {
      const reused = Buffer.from(data.subarray(0, length));
      const state = new Xxh32State(0);
      state.update(reused, 0, length);
      reused.fill(0xff);
      expect(state.digest(), `length ${length}`).toBe(xxh32(data.subarray(0, length)));
    }
  });
});

describe.each(BACKENDS)('other kinds of arrays (%s)', (backend) => {
  const values = escapeyValues(3000, 4);
  const { codebook } = calibrateCodebook(values);
  const payload = encode(values, codebook, { chunkSize: 256 });

  it('the structure checks refuse a view that is not a Uint8Array, and a payload shorter than its meta', () => {
    useBackend(backend);
    const meta = readPayloadMeta(payload);
    const streams = readEscapeStreams(payload, meta);
    const codeOf = (fn: () => unknown): string => {
      try {
        fn();
        return 'none';
      } catch (error) {
        return (error as { code?: string }).code ?? String(error);
      }
    };
    // Before: a DataView or Uint16Array of the same bytes passed every code check (indexing read undefined or 16-bit codes).
    for (const wrong of [new DataView(payload.buffer), new Uint16Array(payload.buffer.slice(0, payload.length & ~1)), payload.buffer, null]) {
      expect(codeOf(() => validatePayloadStructure(wrong as never, meta, streams))).toBe('INVALID_ARGUMENT');
      expect(codeOf(() => readEscapeStreams(wrong as never, meta))).toBe('INVALID_ARGUMENT');
    }
    const detached = new Uint8Array(payload);
    structuredClone(detached.buffer, { transfer: [detached.buffer] });
    for (const short of [new Uint8Array(0), detached, payload.subarray(0, payload.length - 1)]) {
      expect(codeOf(() => readEscapeStreams(short, meta))).toBe('TRUNCATED');
      expect(codeOf(() => validatePayloadStructure(short, meta, streams))).toBe('TRUNCATED');
    }
  });

  it('an emptied (detached) input is an empty one for xxh32; encode refuses it (INVALID_ARGUMENT)', () => {
    useBackend(backend);
    const bytes = new Uint8Array(64);
    structuredClone(bytes.buffer, { transfer: [bytes.buffer] });
    expect(xxh32(bytes)).toBe(xxh32(new Uint8Array(0)));
    const tensor = new Uint16Array(64);
    structuredClone(tensor.buffer, { transfer: [tensor.buffer] });
    // An empty payload for a tensor the caller transferred away would hide its bug.
    expect(codeOf(() => encode(tensor, codebook))).toBe('INVALID_ARGUMENT');
  });
});
