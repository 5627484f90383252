import { calibrateCodebook, createCodebook, decode as codecDecode, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createKernels } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

/** Detaches a buffer the way posting it to a worker with a transfer list does. */
function transfer(buffer: ArrayBufferLike): void {
  structuredClone(buffer, { transfer: [buffer as ArrayBuffer] });
}

const values = modelLikeValues(5_000, 9);
const { codebook } = calibrateCodebook(values);
const payload = codecEncode(values, codebook);

// Values with escapes: some exponent-255 patterns the codebook leaves out.
const escaping = values.slice();
for (let i = 0; i < escaping.length; i += 97) escaping[i] = 0x7f80 ^ (i & 0x7f);
const book = createCodebook(codebook.exponents.filter((e) => e !== 255).slice(0, 15));

for (const backend of ['cpu', 'webasm'] as const) {
  describe(`${backend}: caller arrays transferred while a call is in flight`, () => {
    it('decode with out detached rejects OUTPUT_TOO_SMALL and the backend stays in use', async () => {
      const kernels = await createKernels({ backend });
      try {
        const out = new Uint16Array(values.length);
        const pending = kernels.decode(payload, out);
        transfer(out.buffer);
        await expect(pending).rejects.toMatchObject({ code: 'OUTPUT_TOO_SMALL' });
        const next = await kernels.decode(payload);
        expect(next.backend).toBe(backend);
        expect(next.fallbackReason).toBeNull();
        expect(kernels.availableBackends).toContain(backend);
      } finally {
        await kernels.dispose();
      }
    });

    it('encode with values detached rejects INVALID_ARGUMENT naming values, never a payload of other values', async () => {
      const kernels = await createKernels({ backend });
      try {
        const mine = escaping.slice();
        const pending = kernels.encode(mine, book);
        transfer(mine.buffer);
        await expect(pending).rejects.toMatchObject({ name: 'KernelsError', code: 'INVALID_ARGUMENT', details: { argument: 'values' } });
        const next = await kernels.encode(escaping, book);
        expect(next.backend).toBe(backend);
        expect(next.fallbackReason).toBeNull();
        expect(Array.from(codecDecode(next.payload))).toEqual(Array.from(escaping));
      } finally {
        await kernels.dispose();
      }
    });
  });
}

describe('availableBackends', () => {
  it('drops a backend that failed after creation', async () => {
    const kernels = await createKernels({ backend: 'cpu', testFaults: { failLaunches: true } });
    try {
      expect(kernels.availableBackends).toContain('cpu');
      const result = await kernels.decode(payload);
      expect(result.backend).toBe('codec');
      expect(kernels.availableBackends).not.toContain('cpu');
    } finally {
      await kernels.dispose();
    }
  });
});
