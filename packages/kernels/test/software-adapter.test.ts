// A WebGPU adapter that says it is a software one (isFallbackAdapter: Deno's built-in WebGPU on a
// host with no GPU answers with Mesa's llvmpipe, where a 2^24-value decode took ~10x the codec's
// time): `auto` leaves it out, and says why; before, any navigator.gpu counted as a GPU.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { calibrateCodebook, encode } from '@splitzip/codec';

afterEach(() => {
  Reflect.deleteProperty(globalThis, 'navigator');
  vi.resetModules();
});

/** A navigator.gpu (as Deno has one) whose adapter says what `adapter` holds; it starts nothing. */
function setRuntimeGpu(adapter: object | null): void {
  const gpu = { requestAdapter: () => Promise.resolve(adapter) };
  Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
}

describe("auto and a runtime's software WebGPU adapter", () => {
  it.each([
    ['on the adapter', { isFallbackAdapter: true }],
    ['in its info', { info: { isFallbackAdapter: true, vendor: 'mesa', description: 'llvmpipe (LLVM 15.0.6)' } }],
  ])('isFallbackAdapter %s: installNodeWebGpu says so, and auto decodes on the codec, naming the reason', async (_where, adapter) => {
    setRuntimeGpu(adapter);
    const { installNodeWebGpu } = await import('../src/install-node-webgpu.js');
    expect(await installNodeWebGpu()).toEqual({ available: true, reason: null, fallbackAdapter: true });
    const { createKernels } = await import('../src/node.js');
    const kernels = await createKernels({ backend: 'auto', expectedElementCount: 1 << 23 });
    try {
      // Past 2^22 values auto would pick webgpu for a host result where a GPU answers (auto-rule.ts).
      const values = Uint16Array.from({ length: (1 << 22) + 5 }, (_, i) => 0x3c00 + (i % 97));
      const result = await kernels.decode(encode(values, calibrateCodebook(values).codebook));
      expect(result.backend).toBe('codec');
      expect(result.values.every((v, i) => v === values[i])).toBe(true);
      expect(result.fallbackReason).toMatch(/^webgpu failed to start: the WebGPU adapter is a software one \(isFallbackAdapter/);
    } finally {
      await kernels.dispose();
    }
  }, 60_000);

  it('a hardware adapter is still offered; no adapter at all is unavailable, saying whose', async () => {
    setRuntimeGpu({ isFallbackAdapter: false, info: { isFallbackAdapter: false } });
    const { installNodeWebGpu } = await import('../src/install-node-webgpu.js');
    expect(await installNodeWebGpu()).toEqual({ available: true, reason: null, fallbackAdapter: false });
    vi.resetModules();
    setRuntimeGpu(null);
    const again = await import('../src/install-node-webgpu.js');
    expect(await again.installNodeWebGpu()).toEqual({ available: false, reason: 'navigator.gpu is there but no WebGPU adapter answered', fallbackAdapter: false });
  });
});
