// A WebGPU adapter that says it is a software one (isFallbackAdapter: Deno's built-in WebGPU on a
// host with no GPU answers with Mesa's llvmpipe, where a 2^24-value decode took ~10x the codec's
// time): `auto` keeps it for decodeToDevice only, and host calls say why; before, any
// navigator.gpu counted as a GPU. And a navigator.gpu that cannot answer is "no WebGPU", not an
// error every later createKernels repeats.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { calibrateCodebook, encode } from '@splitzip/codec';

afterEach(() => {
  Reflect.deleteProperty(globalThis, 'navigator');
  vi.useRealTimers();
  vi.resetModules();
});

/** A navigator.gpu (as Deno has one): `gpu` itself, or one whose requestAdapter answers `adapter`. */
function setRuntimeGpu(gpu: object): void {
  Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
}
const answering = (adapter: object | null) => ({ requestAdapter: () => Promise.resolve(adapter) });

// Past 2^22 values auto picks webgpu for a host decode where a GPU answers (auto-rule.ts).
const values = Uint16Array.from({ length: (1 << 22) + 5 }, (_, i) => 0x3c00 + (i % 97));
const payload = encode(values, calibrateCodebook(values).codebook);
const SOFTWARE = /^the WebGPU adapter is a software one \(isFallbackAdapter/;

describe("auto and a runtime's software WebGPU adapter", () => {
  it.each([
    ['on the adapter', { isFallbackAdapter: true }],
    ['in its info', { info: { isFallbackAdapter: true, vendor: 'mesa', description: 'llvmpipe (LLVM 15.0.6)' } }],
  ])('isFallbackAdapter %s: installNodeWebGpu says so; host decodes go to the codec naming it, decodeToDevice still tries webgpu', async (_where, adapter) => {
    setRuntimeGpu(answering(adapter));
    const { installNodeWebGpu } = await import('../src/install-node-webgpu.js');
    expect(await installNodeWebGpu()).toEqual({ available: true, reason: null, fallbackAdapter: true });
    const { createKernels } = await import('../src/node.js');
    const kernels = await createKernels({ backend: 'auto', expectedElementCount: 1 << 23 });
    try {
      const result = await kernels.decode(payload);
      expect(result.backend).toBe('codec');
      expect(result.values.every((v, i) => v === values[i])).toBe(true);
      expect(result.fallbackReason).toMatch(SOFTWARE);
      // The fake adapter has no device, so webgpu did not start: decodeToDevice says that, not "software".
      const onDevice = await kernels.decodeToDevice(payload);
      expect(onDevice.backend).toBe('codec');
      expect(onDevice.fallbackReason).toMatch(/^webgpu failed to start: /);
      expect(onDevice.fallbackReason).not.toMatch(/software/);
    } finally {
      await kernels.dispose();
    }
  }, 60_000);

  it('a hardware adapter is offered for host decodes: auto tries webgpu (here it cannot start: a fake with no device)', async () => {
    setRuntimeGpu(answering({ isFallbackAdapter: false, info: { isFallbackAdapter: false } }));
    const { installNodeWebGpu } = await import('../src/install-node-webgpu.js');
    expect(await installNodeWebGpu()).toEqual({ available: true, reason: null, fallbackAdapter: false });
    const { createKernels } = await import('../src/node.js');
    const kernels = await createKernels({ backend: 'auto', expectedElementCount: 1 << 23 });
    try {
      const result = await kernels.decode(payload);
      expect(result.fallbackReason).toMatch(/^webgpu failed to start: /);
    } finally {
      await kernels.dispose();
    }
  }, 60_000);

  it.each([
    ['no adapter', answering(null)],
    ['no requestAdapter', {}],
    ['a requestAdapter that throws', { requestAdapter: () => { throw new Error('broken driver'); } }],
    ['a requestAdapter that answers no promise', { requestAdapter: () => null }],
    ['a requestAdapter that rejects', { requestAdapter: () => Promise.reject(new Error('lost')) }],
  ])('%s: no WebGPU (available false, saying whose), auto on the codec, and the next call answers the same', async (_what, gpu) => {
    setRuntimeGpu(gpu);
    const { installNodeWebGpu } = await import('../src/install-node-webgpu.js');
    const none = { available: false, reason: 'navigator.gpu is there but no WebGPU adapter answered', fallbackAdapter: false };
    expect(await installNodeWebGpu()).toEqual(none);
    expect(await installNodeWebGpu()).toEqual(none);
    const { createKernels } = await import('../src/node.js');
    const kernels = await createKernels({ backend: 'auto' });
    try {
      expect(kernels.backend).toBe('codec');
    } finally {
      await kernels.dispose();
    }
  }, 60_000);

  it('in a script with nothing else pending, createKernels still answers after ADAPTER_REQUEST_TIMEOUT_MS (the process does not exit first)', async () => {
    const script = `
      Object.defineProperty(globalThis, 'navigator', { value: { gpu: { requestAdapter: () => new Promise(() => {}) } }, configurable: true, writable: true });
      const { createKernels } = await import(${JSON.stringify(new URL('../dist/node.js', import.meta.url).href)});
      const kernels = await createKernels({ backend: 'auto' });
      console.log(JSON.stringify({ backend: kernels.backend }));
      await kernels.dispose();
    `;
    const { execFile } = await import('node:child_process');
    const { promisify } = await import('node:util');
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual({ backend: 'codec' });
  }, 60_000);

  it('a requestAdapter that never answers counts as none after ADAPTER_REQUEST_TIMEOUT_MS', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    setRuntimeGpu({ requestAdapter: () => new Promise(() => {}) });
    const { installNodeWebGpu, ADAPTER_REQUEST_TIMEOUT_MS } = await import('../src/install-node-webgpu.js');
    const status = installNodeWebGpu();
    await vi.advanceTimersByTimeAsync(ADAPTER_REQUEST_TIMEOUT_MS);
    expect(await status).toEqual({ available: false, reason: 'navigator.gpu is there but no WebGPU adapter answered', fallbackAdapter: false });
  });
});
