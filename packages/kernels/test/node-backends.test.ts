import { calibrateCodebook, createCodebook, encode as codecEncode, type Codebook } from '@splitzip/codec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKernels, LAUNCH_MAX_ELEMENTS, type Kernels } from '../src/node.js';
import { allPatterns, escapeHeavyValues, largeModelLikeValues, modelLikeValues } from './fixtures.js';
import { firstMismatch, referenceDecode } from './reference-decode.js';

interface Case {
  name: string;
  values: Uint16Array;
  codebook: Codebook;
  chunkSize?: number;
}

function calibrated(name: string, values: Uint16Array, chunkSize?: number): Case {
  return { name, values, codebook: calibrateCodebook(values).codebook, chunkSize };
}

const modelCodebook = calibrateCodebook(modelLikeValues(1 << 16)).codebook;
const cases: Case[] = [
  calibrated('all 65,536 patterns', allPatterns()),
  { name: 'all 65,536 patterns, model codebook (most escape)', values: allPatterns(3), codebook: modelCodebook },
  calibrated('model-like, 100,003 values (odd)', modelLikeValues(100_003)),
  calibrated('model-like, 4,097 values, chunk 64', modelLikeValues(4_097, 5), 64),
  calibrated('model-like, 200,001 values, chunk 65536', modelLikeValues(200_001, 6), 65_536),
  { name: 'escape-heavy, 30,001 values', values: escapeHeavyValues(30_001), codebook: modelCodebook },
  { name: 'escape-heavy, chunk 65536', values: escapeHeavyValues(131_075, 9), codebook: modelCodebook, chunkSize: 65_536 },
  { name: 'single value', values: new Uint16Array([0xbf80]), codebook: createCodebook([127]) },
  { name: 'single escape', values: new Uint16Array([0x7f80]), codebook: createCodebook([127]) },
  { name: 'three values', values: new Uint16Array([0x3f80, 0xbf00, 0x0001]), codebook: createCodebook([127, 126, 0]) },
  { name: 'empty', values: new Uint16Array(0), codebook: createCodebook([127]) },
];

// Across launches: more than one LAUNCH_MAX_ELEMENTS launch, odd, with escapes in every launch.
const multiLaunch = calibrated('3 launches + 5 values', largeModelLikeValues(2 * LAUNCH_MAX_ELEMENTS + 5));

for (const backend of ['codec', 'webasm', 'cpu'] as const) {
  describe(`${backend} backend`, () => {
    let kernels: Kernels;
    beforeAll(async () => {
      kernels = await createKernels({ backend });
    });
    afterAll(async () => {
      await kernels.dispose();
    });

    it('starts without falling back', () => {
      expect(kernels.backend).toBe(backend);
      expect(kernels.fallbackReason).toBeNull();
      expect(kernels.availableBackends).toContain(backend);
    });

    for (const c of cases) {
      it(`decode is bit-exact against the reference: ${c.name}`, async () => {
        const payload = codecEncode(c.values, c.codebook, c.chunkSize ? { chunkSize: c.chunkSize } : undefined);
        const expected = referenceDecode(payload);
        expect(firstMismatch(expected, c.values)).toBe(-1);
        const result = await kernels.decode(payload);
        expect(result.backend).toBe(backend);
        expect(result.fallbackReason).toBeNull();
        expect(firstMismatch(result.values, expected)).toBe(-1);
      });

      it(`encode gives the codec's bytes: ${c.name}`, async () => {
        const options = c.chunkSize ? { chunkSize: c.chunkSize } : undefined;
        const result = await kernels.encode(c.values, c.codebook, options);
        expect(result.backend).toBe(backend);
        expect(firstMismatch(result.payload, codecEncode(c.values, c.codebook, options))).toBe(-1);
      });
    }

    it('decodeToDevice reads back bit-exact, then frees', async () => {
      const c = cases[2]!;
      const payload = codecEncode(c.values, c.codebook);
      const result = await kernels.decodeToDevice(payload);
      expect(result.backend).toBe(backend);
      expect(result.location).toBe('host');
      expect(result.layout).toBe(backend === 'codec' ? 'bf16' : 'float');
      expect(result.elementCount).toBe(c.values.length);
      expect(firstMismatch(await result.toArray(), c.values)).toBe(-1);
      // Into the caller's array: checked as decode checks `out` (every backend alike).
      const out = new Uint16Array(c.values.length + 2).fill(0xabcd);
      expect(await result.toArray(out)).toBe(out);
      expect(firstMismatch(out.subarray(0, c.values.length), c.values)).toBe(-1);
      expect(Array.from(out.subarray(c.values.length))).toEqual([0xabcd, 0xabcd]);
      await expect(result.toArray(new Uint8Array(2 * c.values.length) as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(result.toArray(new Uint16Array(c.values.length - 1))).rejects.toMatchObject({ code: 'OUTPUT_TOO_SMALL' });
      result.delete();
      await expect(result.toArray()).rejects.toMatchObject({ code: 'DISPOSED' });
    });

    it('decodes into a longer caller array and leaves the tail alone', async () => {
      const c = cases[3]!;
      const payload = codecEncode(c.values, c.codebook, { chunkSize: 64 });
      const out = new Uint16Array(c.values.length + 3).fill(0xabcd);
      const result = await kernels.decode(payload, out);
      expect(firstMismatch(out.subarray(0, c.values.length), c.values)).toBe(-1);
      expect(Array.from(out.subarray(c.values.length))).toEqual([0xabcd, 0xabcd, 0xabcd]);
      expect(result.values.buffer).toBe(out.buffer);
    });

    it(`decode across launches (${multiLaunch.values.length} values) is bit-exact`, async () => {
      const payload = codecEncode(multiLaunch.values, multiLaunch.codebook);
      const result = await kernels.decode(payload);
      expect(result.backend).toBe(backend);
      expect(firstMismatch(result.values, referenceDecode(payload))).toBe(-1);
    });
  });
}

describe('more than 2^24 values (gpu.js index arithmetic is 32-bit float)', () => {
  const n = 2 ** 24 + 4_099;
  const values = largeModelLikeValues(n);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);

  it('webasm decodes bit-exact and encodes the codec bytes', async () => {
    const kernels = await createKernels({ backend: 'webasm' });
    try {
      const decoded = await kernels.decode(payload);
      expect(decoded.backend).toBe('webasm');
      expect(firstMismatch(decoded.values, values)).toBe(-1);
      const encoded = await kernels.encode(values, codebook);
      expect(encoded.backend).toBe('webasm');
      expect(firstMismatch(encoded.payload, payload)).toBe(-1);
    } finally {
      await kernels.dispose();
    }
  });

  it('cpu and codec decode bit-exact against the reference', async () => {
    const expected = referenceDecode(payload);
    expect(firstMismatch(expected, values)).toBe(-1);
    for (const backend of ['cpu', 'codec'] as const) {
      const kernels = await createKernels({ backend });
      try {
        const decoded = await kernels.decode(payload);
        expect(decoded.backend).toBe(backend);
        expect(firstMismatch(decoded.values, expected)).toBe(-1);
      } finally {
        await kernels.dispose();
      }
    }
  });
});
