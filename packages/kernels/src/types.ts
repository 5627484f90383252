import type { Codebook } from '@splitzip/codec';
import type { WebGpuDecodeOptions } from './create-webgpu-decoder.js';

/** gpu.js modes this package drives. */
export type GpuBackendName = 'webgpu' | 'webgl2' | 'webgl' | 'webasm' | 'cpu';
/** Every backend: the gpu.js modes plus `codec`, the codec's own CPU path (the fallback). */
export type BackendName = GpuBackendName | 'codec';
export type BackendRequest = BackendName | 'auto';

/** Wall-clock milliseconds per stage of one call; stages that did not run are 0. */
export interface StageTimings {
  /** Host checks before any launch: header, checksum, escape index and stream, codes. */
  validateMs: number;
  /**
   * Host work before the kernel: packing inputs into floats holding 24-bit integers (gpu.js);
   * webgpu decoder, pieced upload: recording and submitting the launches between the pieces.
   */
  prepareMs: number;
  /** Host-to-device copy (webgpu: writeBuffer until the queue drained; GL/cpu/webasm: inside the kernel call). */
  uploadMs: number;
  /** The kernel launches (webgpu: submit until the queue drained). */
  kernelMs: number;
  /** Device-to-host copy and conversion of the 32-bit float results into the output. */
  readbackMs: number;
  /** Host work after the kernel (encode: escape scatter, assembly, checksum). */
  finishMs: number;
  totalMs: number;
}

/** Which backend ran a call, and why it is not the one asked for. */
export interface BackendReport {
  /** The backend that produced this result. */
  backend: BackendName;
  /** Why the requested (or auto-chosen) backend did not run this call; null when it did. */
  fallbackReason: string | null;
}

/**
 * `values` is the caller's `out` when one was given (its buffer kind, `TBuffer`), else a new array
 * over an ordinary ArrayBuffer (`Kernels.decode` types it so: `crypto.subtle.digest`, `new Blob`,
 * `postMessage` transfers take it as it is).
 */
export interface DecodeResult<TBuffer extends ArrayBufferLike = ArrayBufferLike> extends BackendReport {
  values: Uint16Array<TBuffer>;
  timings: StageTimings;
}

export interface EncodeResult extends BackendReport {
  /** Always a new array over an ordinary ArrayBuffer. */
  payload: Uint8Array<ArrayBuffer>;
  timings: StageTimings;
}

/** One part of a device-resident result: values [firstElement, firstElement + elementCount). */
export interface DeviceSegment {
  firstElement: number;
  elementCount: number;
  /**
   * Where the part lives, in the result's `layout`:
   * - webgpu (`bf16`): the `GPUBuffer` itself (usage STORAGE | COPY_SRC), value `firstElement` at
   *   byte 0, two values per u32 (the first in the low half); its size is 2 bytes per value
   *   rounded up to 16, the bytes past the last value are 0.
   * - webgl/webgl2 (`float`): a gpu.js `Texture`, one value per 32-bit float (the BF16 bit pattern
   *   as an integer 0..65535); pass it to another kernel of the same gpu.js instance.
   * - webasm/cpu (`float`): a `Float32Array`; codec (`bf16`): the decoded `Uint16Array`.
   */
  handle: unknown;
}

export interface DeviceDecodeResult extends BackendReport {
  elementCount: number;
  /** Where the values live: on a GPU, or on the host for the cpu, webasm and codec backends. */
  location: 'webgpu-buffer' | 'webgl-texture' | 'host';
  /** How a segment's handle holds the values: `bf16` 2 bytes each, `float` one 32-bit float each. */
  layout: 'bf16' | 'float';
  /** One per output buffer (webgpu: one unless the tensor exceeds maxBufferSize) or gpu.js launch. */
  segments: readonly DeviceSegment[];
  timings: StageTimings;
  /** Reads the values back (for checks): BF16 bit patterns, into `out` or a new array over an ordinary ArrayBuffer. */
  toArray(out?: undefined): Promise<Uint16Array<ArrayBuffer>>;
  /** Into `out`: the result is `out`, typed with its buffer (no type argument names another: overloads, not a defaulted one). */
  toArray<TBuffer extends ArrayBufferLike>(out: Uint16Array<TBuffer>): Promise<Uint16Array<TBuffer>>;
  toArray<TBuffer extends ArrayBufferLike>(out: Uint16Array<TBuffer> | undefined): Promise<Uint16Array<TBuffer | ArrayBuffer>>;
  /**
   * Frees the result's memory; idempotent; the handles must not be used afterwards. On webgpu the
   * buffers go back to the backend, which reuses a few of them for later results of the same size.
   */
  delete(): void;
}

export interface EncodeOptions {
  /** Values per chunk (power of two, 64..65536; default the codec's 1024). */
  chunkSize?: number | undefined;
}

export interface DecodeOptions {
  /** Check the payload's XXH32 before decoding (default true). Structure is always checked. */
  verify?: boolean | undefined;
}

/** Injected faults, for testing the fallback paths; never set them in production. */
export interface TestFaults {
  /** The backend throws while starting. */
  failStart?: boolean;
  /** The self-check decode returns one wrong value. */
  corruptSelfCheck?: boolean;
  /** Every kernel launch after the self-check throws (a lost device). */
  failLaunches?: boolean;
}

export interface CreateKernelsOptions {
  backend?: BackendRequest | undefined;
  /**
   * Expected tensor size, for `auto`: the rule picks the backend measured fastest at this size
   * (default 2^20 values). Each call re-applies the rule to its own size among the backends that
   * started.
   */
  expectedElementCount?: number | undefined;
  /** webasm only: split kernels across a worker pool (gpu.js async contract). Default false. */
  webasmThreads?: boolean | undefined;
  /** webgpu only: how the native decoder uploads and slices (defaults are the measured best). */
  webgpu?: WebGpuDecodeOptions | undefined;
  /** Injected faults for tests. */
  testFaults?: TestFaults | undefined;
}

export interface Kernels {
  /**
   * The backend this instance uses for its calls now: after start-up fallbacks, and after a
   * backend failed during a call (then `codec`). Under `auto`, the one its rule picks for a decode
   * of `expectedElementCount` values.
   */
  readonly backend: BackendName;
  /** Why `backend` differs from the one requested (a start-up failure, or a failure during a call); null when it does not. */
  readonly fallbackReason: string | null;
  /** Backends that passed their start-up self-check in this instance and have not failed during a call since. */
  readonly availableBackends: readonly BackendName[];
  /** Into `out`, or without it a new array over an ordinary ArrayBuffer (`DecodeResult<ArrayBuffer>`). */
  decode(payload: Uint8Array, out?: undefined, options?: DecodeOptions): Promise<DecodeResult<ArrayBuffer>>;
  /** Into `out`: `values` is `out`, typed with its buffer (overloads: `decode<SharedArrayBuffer>(payload)` does not compile, it returned an ordinary one). */
  decode<TBuffer extends ArrayBufferLike>(payload: Uint8Array, out: Uint16Array<TBuffer>, options?: DecodeOptions): Promise<DecodeResult<TBuffer>>;
  decode<TBuffer extends ArrayBufferLike>(payload: Uint8Array, out: Uint16Array<TBuffer> | undefined, options?: DecodeOptions): Promise<DecodeResult<TBuffer | ArrayBuffer>>;
  encode(values: Uint16Array, codebook: Codebook, options?: EncodeOptions): Promise<EncodeResult>;
  decodeToDevice(payload: Uint8Array, options?: DecodeOptions): Promise<DeviceDecodeResult>;
  /**
   * True once dispose() was called: later calls reject with DISPOSED. Every instance createKernels
   * returns has it; optional so that a caller's own implementation or fake still fits.
   */
  readonly disposed?: boolean;
  dispose(): Promise<void>;
}
