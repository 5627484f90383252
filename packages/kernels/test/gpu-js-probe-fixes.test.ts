// gpu.js backends: findings of the browser probe that show in Node too (cpu/webasm backends, a
// fake gpu.js backend); the GL/WebGPU-only ones are in browser.test.ts (runProbeChecks).
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import type { GpuBackend } from '../src/gpu-backend.js';
import { createGpuBackendImpl } from '../src/gpu-backend-impl.js';
import { createKernels } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

function transfer(buffer: ArrayBufferLike): void {
  structuredClone(buffer, { transfer: [buffer as ArrayBuffer] });
}

const values = modelLikeValues(5_000, 9);
const { codebook } = calibrateCodebook(values);
const payload = codecEncode(values, codebook);

/** A gpu.js backend whose encode launches return what `result` says (a lost GL context gives zeros). */
function fakeGpu(result: (n: number, chunkSize: number) => { words: Float32Array; escapeCounts: Float32Array }): GpuBackend {
  return {
    name: 'webgl2',
    location: 'webgl-texture',
    disposed: false,
    decodeLaunch: () => Promise.reject(new Error('unused')),
    readHandle: () => Promise.reject(new Error('unused')),
    deleteHandle: () => undefined,
    encodeLaunch: (v, _code, chunkSize) => Promise.resolve(result(v.length, chunkSize)),
    dispose: () => Promise.resolve(),
  };
}

describe('encode: the GPU result is checked on the host before it becomes a payload', () => {
  it('all-zero pair words and escape counts (a lost context) are KERNEL_FAILED, not a valid payload', async () => {
    const impl = createGpuBackendImpl(
      fakeGpu((n, chunkSize) => ({ words: new Float32Array(Math.ceil(n / 2)), escapeCounts: new Float32Array(Math.ceil(n / chunkSize)) })),
    );
    await expect(impl.encode(values, codebook, undefined)).rejects.toMatchObject({ code: 'KERNEL_FAILED' });
  });

  it('a partial result (the last words zeroed) is KERNEL_FAILED; the whole result gives the codec payload', async () => {
    const word = (i: number): { code: number; sm: number } => {
      const v = values[i]!;
      const code = codebook.exponents.indexOf((v >>> 7) & 0xff);
      return { code: code < 0 ? 0 : code, sm: ((v >>> 8) & 0x80) | (v & 0x7f) };
    };
    const words = new Float32Array(Math.ceil(values.length / 2));
    for (let j = 0; j < words.length; j++) {
      const a = word(2 * j);
      const b = 2 * j + 1 < values.length ? word(2 * j + 1) : { code: 0, sm: 0 };
      words[j] = a.code + b.code * 16 + a.sm * 256 + b.sm * 65536;
    }
    const gpu = (zeroTail: number) =>
      fakeGpu((n, chunkSize) => {
        const counts = new Float32Array(Math.ceil(n / chunkSize));
        for (let i = 0; i < n; i++) if (!codebook.exponents.includes((values[i]! >>> 7) & 0xff)) counts[Math.floor(i / chunkSize)]!++;
        const result = words.slice();
        result.fill(0, result.length - zeroTail);
        return { words: result, escapeCounts: counts };
      });
    expect((await createGpuBackendImpl(gpu(0)).encode(values, codebook, undefined)).payload).toEqual(codecEncode(values, codebook));
    await expect(createGpuBackendImpl(gpu(10)).encode(values, codebook, undefined)).rejects.toMatchObject({ code: 'KERNEL_FAILED' });
  });
});

for (const backend of ['cpu', 'webasm'] as const) {
  describe(`${backend}: probe findings`, () => {
    it('encode of a detached Uint16Array is INVALID_ARGUMENT (the codec rule), not an empty payload', async () => {
      const kernels = await createKernels({ backend });
      try {
        const detached = values.slice();
        transfer(detached.buffer);
        await expect(kernels.encode(detached, codebook)).rejects.toMatchObject({ name: 'SplitZipError', code: 'INVALID_ARGUMENT' });
        expect(kernels.availableBackends).toContain(backend);
      } finally {
        await kernels.dispose();
      }
    });

    it('an out overlapping the payload bytes is INVALID_ARGUMENT (the codec rule)', async () => {
      const kernels = await createKernels({ backend });
      try {
        const bytes = new Uint8Array(payload.length + 2 * values.length + 16);
        bytes.set(payload);
        const inPlace = bytes.subarray(0, payload.length);
        const out = new Uint16Array(bytes.buffer, 0, values.length);
        await expect(kernels.decode(inPlace, out)).rejects.toMatchObject({ name: 'SplitZipError', code: 'INVALID_ARGUMENT' });
        expect(kernels.availableBackends).toContain(backend);
        const apart = new Uint16Array(bytes.buffer, Math.ceil(payload.length / 2) * 2, values.length);
        expect((await kernels.decode(inPlace, apart)).values).toEqual(values);
      } finally {
        await kernels.dispose();
      }
    });

    it('toArray of a decodeToDevice result after dispose is DISPOSED', async () => {
      const kernels = await createKernels({ backend });
      const device = await kernels.decodeToDevice(payload);
      await kernels.dispose();
      await expect(device.toArray()).rejects.toMatchObject({ name: 'KernelsError', code: 'DISPOSED' });
    });
  });
}

describe('codec: a device result does not outlive its instance', () => {
  it('toArray of a decodeToDevice result after dispose is DISPOSED, as on the GPU backends', async () => {
    const kernels = await createKernels({ backend: 'codec' });
    const device = await kernels.decodeToDevice(payload);
    expect(await device.toArray()).toEqual(values);
    await kernels.dispose();
    await expect(device.toArray()).rejects.toMatchObject({ name: 'KernelsError', code: 'DISPOSED' });
    await expect(device.toArray(new Uint16Array(values.length))).rejects.toMatchObject({ name: 'KernelsError', code: 'DISPOSED' });
  });
});

describe('dispose while an encode is in flight', () => {
  it('cpu: a call caught by dispose between launches rejects DISPOSED', async () => {
    const kernels = await createKernels({ backend: 'cpu' });
    const big = modelLikeValues(2 ** 22 + 5, 3);
    const outcome = kernels.encode(big, calibrateCodebook(big).codebook).then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await kernels.dispose();
    expect(await outcome).toMatchObject({ name: 'KernelsError', code: 'DISPOSED' });
  }, 60_000);
});
