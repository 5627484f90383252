// encode into a caller's `out` that cannot hold the payload: OUTPUT_TOO_SMALL must name the
// payload's real size, so a caller who retries with it succeeds. Before, the first refusal named
// the escape-free size (65,536 patterns 0..65535: "needs 99072"), and the retry with that was
// refused again ("needs 283392").
import { afterAll, describe, expect, it } from 'vitest';
import { calibrateCodebook, computePayloadLayout, decode, encode, setCodecBackend, type SplitZipError } from '../src/index.js';
import { BACKENDS, useBackend } from './backends.js';

afterAll(() => setCodecBackend('auto'));

const values = new Uint16Array(65536).map((_, i) => i);
const { codebook, escapeCount } = calibrateCodebook(values);
const exactBytes = computePayloadLayout(values.length, escapeCount).totalBytes;
const escapeFreeBytes = computePayloadLayout(values.length, 0).totalBytes;

function refusal(run: () => unknown): SplitZipError {
  try {
    run();
  } catch (error) {
    return error as SplitZipError;
  }
  throw new Error('encode did not refuse');
}

describe.each(BACKENDS)('encode into a short out on the %s backend', (backend) => {
  it('names the real payload size, with or without escapeCount, and a retry with it succeeds', () => {
    useBackend(backend);
    expect(escapeFreeBytes).toBeLessThan(exactBytes); // the case the bug hid
    for (const options of [{ escapeCount }, {}]) {
      for (const shortBytes of [1000, escapeFreeBytes, exactBytes - 1]) {
        const error = refusal(() => encode(values, codebook, { ...options, out: new Uint8Array(shortBytes) }));
        expect(error.code).toBe('OUTPUT_TOO_SMALL');
        expect(error.details).toMatchObject({ outBytes: shortBytes, needed: exactBytes, escapeCount });
        expect(error.message).toContain(`the payload needs ${exactBytes} (${escapeCount} escapes;`);
        expect(error.message).toContain('computePayloadLayout(n, escapeCount, chunkSize).totalBytes');
      }
      const needed = refusal(() => encode(values, codebook, { ...options, out: new Uint8Array(escapeFreeBytes - 1) })).details.needed as number;
      const payload = encode(values, codebook, { ...options, out: new Uint8Array(needed) });
      expect(payload.length).toBe(needed);
      expect(decode(payload)).toEqual(values);
    }
  });
});
