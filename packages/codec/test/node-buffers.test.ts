// Payloads in Node Buffers, as fs.readFile gives them: a Buffer's `slice` is a view, not a copy,
// so any code that copies with `slice` and then writes (or reads `.buffer`) acts on the caller's
// bytes. Before the fix, verifying a Buffer payload zeroed its stored checksum: a second verify failed.
import { describe, expect, it } from 'vitest';
import { Xxh32State } from '../src/xxh32.js';
import { calibrateCodebook, convertPayloadVersion, decode, encode, readEscapeStreams, readPayloadMeta, verifyPayloadChecksum, xxh32 } from '../src/index.js';
import { BACKENDS, useBackend } from './backends.js';
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
