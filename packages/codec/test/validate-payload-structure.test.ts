// validatePayloadStructure is the decode-time rule check (FORMAT.md reader rule 8) for decoders that
// cannot check as they go (GPU kernels do not bounds-check). It must reject exactly what the codec's
// own decoder rejects: compared on seeded corruptions of the escape index, positions and codes.
import { describe, expect, it } from 'vitest';
import {
  createCodebook,
  decode,
  encode,
  readEscapeStreams,
  readPayloadMeta,
  SplitZipError,
  validatePayloadStructure,
} from '../src/index.js';
import { createRandom, valuesWithExponents } from './reference.js';

function structureError(payload: Uint8Array): string | undefined {
  try {
    const meta = readPayloadMeta(payload);
    validatePayloadStructure(payload, meta, readEscapeStreams(payload, meta));
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(SplitZipError);
    return (error as SplitZipError).code;
  }
}

function decodeError(payload: Uint8Array): string | undefined {
  try {
    decode(payload, undefined, { verify: false });
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(SplitZipError);
    return (error as SplitZipError).code;
  }
}

describe('validatePayloadStructure', () => {
  const values = valuesWithExponents(1001, [120, 121, 122, 9, 250], 7);
  const payload = encode(values, createCodebook([120, 121, 122]), { chunkSize: 64 });
  const meta = readPayloadMeta(payload);

  it('accepts valid payloads, odd sizes and the empty tensor', () => {
    expect(structureError(payload)).toBeUndefined();
    expect(structureError(encode(new Uint16Array(0), createCodebook([0])))).toBeUndefined();
    expect(structureError(encode(values.subarray(0, 65), createCodebook([120, 121, 122, 9, 250])))).toBeUndefined();
  });

  it('rejects exactly what decode rejects, on seeded corruptions of the decode-time sections', () => {
    const random = createRandom(11);
    const { codes, escapeIndex, escapePositions } = meta.layout;
    const targets = [codes, escapeIndex, escapePositions];
    let rejected = 0;
    for (let trial = 0; trial < 600; trial++) {
      const bad = payload.slice();
      const section = targets[trial % targets.length]!;
      const at = section.offsetBytes + Math.floor(random() * section.byteLength);
      bad[at]! ^= 1 << Math.floor(random() * 8);
      const expected = decodeError(bad);
      expect(structureError(bad), `trial ${trial}, byte ${at}`).toBe(expected);
      if (expected !== undefined) rejected++;
    }
    expect(rejected).toBeGreaterThan(100); // the sweep really exercises the rejections
  });
});
