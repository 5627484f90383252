import { KernelsError } from './errors.js';
import {
  BUFFER_USAGE_COPY_DST,
  BUFFER_USAGE_STORAGE,
  gpujs,
  type GPUBufferLike,
  type GpuJsInstance,
  type GpuJsKernel,
  type WebGpuContextLike,
} from './gpu-js.js';
import { COUNT_ESCAPES_KERNEL_SOURCE, DECODE_KERNEL_SOURCE, ENCODE_PAIRS_KERNEL_SOURCE } from './kernel-sources.js';
import type { DecodeLaunch } from './pack-decode-launch.js';
import type { GpuBackendName, StageTimings } from './types.js';

const now = (): number => performance.now();

/** A started gpu.js backend: runs single launches; create-kernels.ts splits tensors into launches. */
export interface GpuBackend {
  readonly name: GpuBackendName;
  readonly location: 'webgpu-buffer' | 'webgl-texture' | 'host';
  /** Runs one decode launch; the result stays where the backend computes (see DeviceSegment.handle). */
  decodeLaunch(
    launch: DecodeLaunch,
    codebook: Float32Array,
    chunkSize: number,
    bias: number,
    timings: StageTimings,
  ): Promise<unknown>;
  /** Reads a decode result back as one float per value. */
  readHandle(handle: unknown): Promise<Float32Array>;
  deleteHandle(handle: unknown): void;
  /** Encode launch: pair words (codeByte | sm0 << 8 | sm1 << 16) and per-chunk escape counts. */
  encodeLaunch(
    values: Float32Array,
    codeOfExponent: Float32Array,
    chunkSize: number,
    timings: StageTimings,
  ): Promise<{ words: Float32Array; escapeCounts: Float32Array }>;
  /** True once dispose() was called: device results must not be read any more. */
  readonly disposed: boolean;
  dispose(): Promise<void>;
}

export interface GpuBackendOptions {
  /** webasm: run under gpu.js's async contract, which splits kernels over a worker pool. */
  webasmThreads?: boolean | undefined;
}

/** Whether gpu.js reports the platform support for a mode (webgpu: an adapter must answer). */
export async function isGpuModeSupported(name: GpuBackendName): Promise<boolean> {
  const { GPU } = gpujs;
  switch (name) {
    case 'webgpu':
      return GPU.isWebGPUSupported && (await GPU.isWebGPUAvailable());
    case 'webgl2':
      return GPU.isWebGL2Supported;
    case 'webgl':
      return GPU.isWebGLSupported;
    case 'webasm':
      return GPU.isWebAssemblySupported;
    case 'cpu':
      return true;
  }
}

/** Starts a gpu.js backend; throws BACKEND_UNAVAILABLE when the platform lacks it. */
export async function startGpuBackend(name: GpuBackendName, options: GpuBackendOptions = {}): Promise<GpuBackend> {
  if (!(await isGpuModeSupported(name))) {
    throw new KernelsError('BACKEND_UNAVAILABLE', `gpu.js reports no ${name} support on this platform`, { backend: name });
  }
  const gpu = new gpujs.GPU({ mode: name });
  const onDevice = name === 'webgpu' || name === 'webgl2' || name === 'webgl';
  const asyncMode = name === 'webasm' && options.webasmThreads === true;
  const common = {
    output: [1],
    precision: 'single',
    tactic: 'precision',
    dynamicOutput: true,
    dynamicArguments: true,
    asyncMode,
  };
  const decodeKernel = gpu.createKernel(DECODE_KERNEL_SOURCE, { ...common, pipeline: onDevice, immutable: onDevice });
  const pairsKernel = gpu.createKernel(ENCODE_PAIRS_KERNEL_SOURCE, { ...common });
  // The escape-count loop runs chunkSize times; GL and WGSL need the bound up front.
  const countKernel = gpu.createKernel(COUNT_ESCAPES_KERNEL_SOURCE, { ...common, loopMaxIterations: 65536 });

  let context: WebGpuContextLike | null = null;
  if (name === 'webgpu') context = await gpujs.WebGPUContext.acquire();
  const inputs = new WebGpuInputs(context);

  // gpu.js degrades a kernel it cannot build to its cpu backend with only a console warning;
  // a result must never claim a backend that did not run it.
  const expectedClass = {
    webgpu: gpujs.WebGPUKernel,
    webgl2: gpujs.WebGL2Kernel,
    webgl: gpujs.WebGLKernel,
    webasm: gpujs.WebAssemblyKernel,
    cpu: gpujs.CPUKernel,
  }[name];
  const checkMode = (kernel: GpuJsKernel): void => {
    const ran = kernel.kernel?.constructor;
    if (ran !== expectedClass) {
      throw new KernelsError('KERNEL_FAILED', `gpu.js ran the kernel on ${ran?.name ?? 'an unknown backend'} instead of ${name}`, {
        backend: name,
        ranOn: ran?.name ?? null,
        gpujsReason: kernel.kernel?.fallbackReason ?? null,
      });
    }
  };
  const drain = async (): Promise<void> => {
    if (context) await context.device.queue.onSubmittedWorkDone();
  };
  /**
   * A lost GL context (the browser drops the oldest past ~16 live ones, or WEBGL_lose_context)
   * makes every launch and readback "succeed" with zeros: after each one, a lost context is a
   * backend failure, never data. A loss is for good: a context the page restored (it called
   * preventDefault on the event) answers isContextLost() false again but holds none of the
   * kernels' programs, textures or framebuffers, so launches there give zeros too. Each GL
   * canvas is watched from the first launch on (the kernels are built then) and one loss event
   * fails this instance for good, device results made before it included.
   */
  let lost = false;
  const watched = new WeakSet<object>();
  const onContextLost = (): void => {
    lost = true;
  };
  const checkLost = (): void => {
    if (disposed) throw new KernelsError('DISPOSED', 'this Kernels instance was disposed', { backend: name });
    if (context?.isLost) throw new KernelsError('KERNEL_FAILED', `the ${name} device was lost`, { backend: name });
    for (const kernel of [decodeKernel, pairsKernel, countKernel]) {
      const gl = (kernel.kernel as { context?: GlContextLike } | undefined)?.context;
      if (typeof gl?.isContextLost !== 'function') continue;
      const canvas = gl.canvas;
      if (canvas && typeof canvas.addEventListener === 'function' && !watched.has(canvas)) {
        watched.add(canvas);
        canvas.addEventListener('webglcontextlost', onContextLost);
      }
      if (gl.isContextLost()) lost = true;
    }
    if (lost) {
      throw new KernelsError('KERNEL_FAILED', `the ${name} context was lost (the browser dropped it or WEBGL_lose_context); a restored context holds none of this instance's kernels`, {
        backend: name,
      });
    }
  };
  let disposed = false;
  /**
   * One launch (with its readback) at a time per instance: the webgpu input buffers and each
   * kernel's output size are shared, so an interleaved call would read another call's values.
   */
  let tail: Promise<unknown> = Promise.resolve();
  const serial = <T>(task: () => Promise<T>): Promise<T> => {
    const run = tail.then(() => {
      checkLost();
      return task();
    });
    tail = run.catch(() => undefined);
    return run;
  };

  return {
    name,
    location: name === 'webgpu' ? 'webgpu-buffer' : onDevice ? 'webgl-texture' : 'host',

    decodeLaunch(launch, codebook, chunkSize, bias, timings) {
      return serial(async () => {
        let t = now();
        const args = [
          inputs.put(0, launch.words),
          inputs.put(1, launch.escStart),
          inputs.put(2, launch.escEntries),
          inputs.put(3, codebook),
          chunkSize,
          1 / chunkSize,
          bias,
        ];
        if (context) {
          await drain();
          timings.uploadMs += now() - t;
          t = now();
        }
        decodeKernel.setOutput([launch.elementCount]);
        const handle = await decodeKernel(...args);
        await drain();
        timings.kernelMs += now() - t;
        checkMode(decodeKernel);
        checkLost();
        return handle;
      });
    },

    readHandle(handle) {
      return serial(async () => {
        if (handle instanceof Float32Array) return handle;
        const data = await (handle as { toArray(): Float32Array | Promise<Float32Array> }).toArray();
        checkLost();
        return data;
      });
    },

    deleteHandle(handle) {
      if (handle instanceof Float32Array) return;
      (handle as { delete(): void }).delete();
    },

    encodeLaunch(values, codeOfExponent, chunkSize, timings) {
      return serial(async () => {
        let t = now();
        const valuesArg = inputs.put(4, values);
        const codeArg = inputs.put(5, codeOfExponent);
        if (context) {
          await drain();
          timings.uploadMs += now() - t;
          t = now();
        }
        pairsKernel.setOutput([Math.ceil(values.length / 2)]);
        const words = (await pairsKernel(valuesArg, codeArg, values.length)) as Float32Array;
        countKernel.setOutput([Math.ceil(values.length / chunkSize)]);
        const escapeCounts = (await countKernel(valuesArg, codeArg, values.length, chunkSize)) as Float32Array;
        timings.kernelMs += now() - t;
        checkMode(pairsKernel);
        checkMode(countKernel);
        checkLost();
        return { words, escapeCounts };
      });
    },

    get disposed() {
      return disposed;
    },

    async dispose() {
      if (disposed) return;
      // The launch in progress finishes on live buffers; queued and later ones are DISPOSED (checkLost).
      const pending = tail;
      disposed = true;
      await pending;
      inputs.dispose();
      await disposeGpu(gpu);
    },
  };
}

/** What checkLost reads of a gpu.js kernel's GL context (absent on webgpu, webasm and cpu). */
interface GlContextLike {
  isContextLost?: () => boolean;
  canvas?: { addEventListener?: (type: string, listener: () => void) => void } | null;
}

async function disposeGpu(gpu: GpuJsInstance): Promise<void> {
  await gpu.destroy();
}

/**
 * WebGPU only: array inputs go into storage buffers this class owns (writeBuffer straight from the
 * packed Float32Array) and reach the kernel as gpu.js buffer handles, which skips gpu.js's own
 * copy of every argument and makes the upload measurable on its own. Elsewhere the array itself
 * is passed and gpu.js uploads it (a texture on GL; nothing on cpu/webasm).
 */
class WebGpuInputs {
  private readonly buffers: (GPUBufferLike | null)[] = [];

  constructor(private readonly context: WebGpuContextLike | null) {}

  put(slot: number, data: Float32Array): unknown {
    const { context } = this;
    if (!context) return data;
    const byteLength = Math.max(16, Math.ceil(data.byteLength / 16) * 16);
    let buffer = this.buffers[slot] ?? null;
    if (!buffer || buffer.size < byteLength) {
      buffer?.destroy();
      buffer = context.device.createBuffer({ size: byteLength, usage: BUFFER_USAGE_STORAGE | BUFFER_USAGE_COPY_DST });
      this.buffers[slot] = buffer;
    }
    context.device.queue.writeBuffer(buffer, 0, data);
    return new gpujs.WebGPUBufferResult({ buffer, output: [data.length], context, kernel: null });
  }

  dispose(): void {
    for (const buffer of this.buffers) buffer?.destroy();
    this.buffers.length = 0;
  }
}
