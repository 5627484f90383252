// The slice of gpu.js this package uses, typed here: gpu.js's own typings predate the webgpu and
// webasm backends. A default import works for the CommonJS package in Node and for the browser
// shim that re-exports gpu-browser.js's global `GPU` (which carries every export as a property).
import gpujsModule from 'gpu.js';

export interface GpuJsKernel {
  (...args: unknown[]): unknown;
  setOutput(output: number[]): GpuJsKernel;
  destroy(removeCanvasReferences?: boolean): void;
  /** The backend kernel behind the run shortcut (gpu.js swaps it on a fallback). */
  kernel?: { constructor: { name?: string }; fallbackReason?: string | null };
}

export interface GpuJsInstance {
  createKernel(source: string, settings: Record<string, unknown>): GpuJsKernel;
  destroy(): Promise<void>;
}

export interface WebGpuContextLike {
  device: GPUDeviceLike;
  isLost: boolean;
}

/** The few GPUDevice members used here (the DOM lib's types are not assumed in Node builds). */
export interface GPUDeviceLike {
  createBuffer(descriptor: { size: number; usage: number; mappedAtCreation?: boolean }): GPUBufferLike;
  queue: {
    writeBuffer(buffer: GPUBufferLike, offset: number, data: ArrayBufferView | ArrayBuffer, dataOffset?: number, size?: number): void;
    onSubmittedWorkDone(): Promise<void>;
    submit(buffers: unknown[]): void;
  };
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number };
}

export interface GPUBufferLike {
  size: number;
  destroy(): void;
}

export interface GpuJsModule {
  GPU: {
    new (settings: { mode: string }): GpuJsInstance;
    isWebGPUSupported: boolean;
    isWebGPUAvailable(): Promise<boolean>;
    isWebGL2Supported: boolean;
    isWebGLSupported: boolean;
    isWebAssemblySupported: boolean;
  };
  WebGPUContext: { acquire(): Promise<WebGpuContextLike> };
  WebGPUKernel: unknown;
  WebGL2Kernel: unknown;
  WebGLKernel: unknown;
  WebAssemblyKernel: unknown;
  CPUKernel: unknown;
  WebGPUBufferResult: new (settings: {
    buffer: GPUBufferLike;
    output: number[];
    context: WebGpuContextLike;
    kernel: unknown;
  }) => unknown;
}

export const gpujs = gpujsModule as unknown as GpuJsModule;

/** GPUBufferUsage values, fixed by the WebGPU spec (the globals exist only where WebGPU does). */
export const BUFFER_USAGE_STORAGE = 0x0080;
export const BUFFER_USAGE_COPY_DST = 0x0008;
