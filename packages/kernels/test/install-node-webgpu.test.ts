// installNodeWebGpu's wrapper against a fake Dawn whose GPUDevice refuses a plain function for
// `onuncapturederror`, as Dawn's Node binding (npm `webgpu`) does: gpu.js (unpatched, as npm users
// get it) assigns one in WebGPUContext.acquire(), which rejects without the wrapper.
import { afterAll, describe, expect, it, vi } from 'vitest';
import { gpujs } from '../src/gpu-js.js';
import { installNodeWebGpu } from '../src/install-node-webgpu.js';

class FakeDevice {
  readonly #native = true;
  readonly lost = new Promise<never>(() => {});
  readonly limits = { maxStorageBufferBindingSize: 1 << 27, maxBufferSize: 1 << 28 };
  destroyed = false;
  get onuncapturederror(): null {
    return null;
  }
  set onuncapturederror(_handler: unknown) {
    throw new TypeError('invalid value to onuncapturederror');
  }
  /** A native method: refuses any receiver but the real device. */
  createBuffer(descriptor: { size: number }): { size: number } {
    if (!(this instanceof FakeDevice) || !this.#native) throw new TypeError('Illegal invocation');
    return { size: descriptor.size };
  }
  destroy(): void {
    this.destroyed = true;
  }
}

class FakeAdapter {
  readonly limits = { maxStorageBufferBindingSize: 1 << 27, maxBufferSize: 1 << 28 };
  readonly devices: FakeDevice[] = [];
  requestDevice(): Promise<FakeDevice> {
    const device = new FakeDevice();
    this.devices.push(device);
    return Promise.resolve(device);
  }
}

class FakeGpu {
  readonly adapter = new FakeAdapter();
  requestAdapter(): Promise<FakeAdapter> {
    return Promise.resolve(this.adapter);
  }
}

const created: FakeGpu[] = [];
const createdWith: string[][] = [];
vi.mock('webgpu', () => ({
  create: (flags: string[]) => {
    const gpu = new FakeGpu();
    created.push(gpu);
    createdWith.push(flags);
    return gpu;
  },
  globals: {},
}));

function setNavigatorGpu(gpu: unknown): void {
  Object.defineProperty(globalThis, 'navigator', { value: gpu === undefined ? undefined : { gpu }, configurable: true, writable: true });
}

const hadNavigator = Object.getOwnPropertyDescriptor(globalThis, 'navigator');
afterAll(async () => {
  await (gpujs.WebGPUContext as unknown as { destroy(): Promise<void> }).destroy();
  if (hadNavigator) Object.defineProperty(globalThis, 'navigator', hadNavigator);
  else delete (globalThis as { navigator?: unknown }).navigator;
});

describe('installNodeWebGpu: a GPUDevice that refuses onuncapturederror', () => {
  it('unwrapped, gpu.js WebGPUContext.acquire() rejects (the failure the wrapper fixes)', async () => {
    setNavigatorGpu(new FakeGpu());
    await expect(gpujs.WebGPUContext.acquire()).rejects.toThrow('invalid value to onuncapturederror');
  });

  it('through the installed wrapper, acquire() resolves with the real device objects', async () => {
    setNavigatorGpu(undefined);
    expect(await installNodeWebGpu()).toEqual({ available: true, reason: null, fallbackAdapter: false });
    expect(created).toHaveLength(1);
    const gpu = created[0]!;
    expect((globalThis as { navigator?: { gpu?: unknown } }).navigator?.gpu).toBe(gpu);

    const context = await gpujs.WebGPUContext.acquire();
    const device = gpu.adapter.devices.at(-1)!;
    expect(context.device).toBe(device);
    expect(device).toBeInstanceOf(FakeDevice);
    expect(device.createBuffer({ size: 16 })).toEqual({ size: 16 });
    // the real accessor is still what answers and is tried
    expect(device.onuncapturederror).toBeNull();
    expect(() => {
      device.onuncapturederror = null;
    }).not.toThrow();
  });
});

// The user probe: flags given after Dawn was installed (createKernels installs it, with none) were
// dropped without a word, and a string was spread into one flag per character.
describe('installNodeWebGpu: flags', () => {
  // Order matters: the test above installed Dawn, with no flags.
  it('after the install, other flags are INVALID_ARGUMENT; none, or the same, still answer', async () => {
    expect(createdWith).toEqual([[]]);
    await expect(installNodeWebGpu(['enable-dawn-features=allow_unsafe_apis'])).rejects.toMatchObject({
      name: 'KernelsError',
      code: 'INVALID_ARGUMENT',
      details: { argument: 'flags', installedFlags: [] },
    });
    await expect(installNodeWebGpu('enable-dawn-features=allow_unsafe_apis' as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument: 'flags' } });
    await expect(installNodeWebGpu([7] as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument: 'flags' } });
    expect(await installNodeWebGpu()).toEqual({ available: true, reason: null, fallbackAdapter: false });
    expect(await installNodeWebGpu([])).toEqual({ available: true, reason: null, fallbackAdapter: false });
    expect(created).toHaveLength(1);
  });
});
