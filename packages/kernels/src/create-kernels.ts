import { isSplitZipError, type Codebook } from '@splitzip/codec';
import { isUint8Array } from '@splitzip/codec/internal';
import { autoStartOrder, pickBackend, type Operation, type Platform } from './auto-rule.js';
import type { BackendImpl } from './backend-impl.js';
import { createCodecBackend } from './codec-backend.js';
import { isKernelsError, KernelsError } from './errors.js';
import { startGpuBackend, type GpuBackend } from './gpu-backend.js';
import { createGpuBackendImpl } from './gpu-backend-impl.js';
import { gpujs } from './gpu-js.js';
import { CODE_GENERATION_REFUSED, isCodeGenerationRefused } from './is-code-generation-refused.js';
import type { ChecksumOffload } from './checksum-offload.js';
import { checkDecodeArguments, checkEncodeArguments, checkPayloadArray } from './check-call-arguments.js';
import { checkDecodeOptions, checkEncodeOptions } from './check-call-options.js';
import { checkOutputKind } from './check-output.js';
import { checkCreateKernelsOptions } from './check-kernels-options.js';
import { createWebGpuDecoder, type WebGpuDecodeOptions } from './create-webgpu-decoder.js';
import { createWebGpuBackendImpl } from './webgpu-backend-impl.js';
import type { GpuDeviceNative } from './webgpu-types.js';
import { getSelfCheckCase } from './self-check.js';
import type {
  BackendName,
  CreateKernelsOptions,
  DecodeOptions,
  DecodeResult,
  DeviceDecodeResult,
  EncodeOptions,
  EncodeResult,
  GpuBackendName,
  Kernels,
  TestFaults,
} from './types.js';

const DEFAULT_EXPECTED_ELEMENTS = 2 ** 20;

/** What a build adds to the shared core: Node, a worker thread for the webgpu decoder's checksums. */
export interface PlatformHooks {
  createChecksumOffload?: (options: WebGpuDecodeOptions) => ChecksumOffload | null;
  /**
   * Backends `auto` offers for decodeToDevice only, each with the reason host decodes and encodes
   * leave it out (a software WebGPU adapter: Node's createKernels).
   */
  deviceOnly?: Readonly<Partial<Record<BackendName, string>>>;
}

/** Internal entry: the Node and browser builds pass their platform (their measurement set). */
export async function createKernelsFor(
  platform: Platform,
  options: CreateKernelsOptions = {},
  unavailable: Readonly<Record<string, string>> = {},
  hooks: PlatformHooks = {},
): Promise<Kernels> {
  checkCreateKernelsOptions(options);
  const requested = options.backend ?? 'auto';
  const faults = options.testFaults ?? {};
  const codec = createCodecBackend();
  const started = new Map<BackendName, BackendImpl>([['codec', codec]]);
  /** Why a backend is not (or no longer) usable, for fallback reports. */
  const failures = new Map<BackendName, string>();

  const expected = options.expectedElementCount ?? DEFAULT_EXPECTED_ELEMENTS;
  const isGpu = (b: BackendName): b is GpuBackendName => b !== 'codec';
  const order = requested === 'auto' ? autoStartOrder(platform, expected) : { always: [], firstOf: [] };
  const wanted: GpuBackendName[] =
    requested === 'auto' ? [...order.always, ...order.firstOf].filter(isGpu) : requested === 'codec' ? [] : [requested];
  let deviceStarted = false;
  for (const name of wanted) {
    // Of the device-only candidates (ranked best first), the first that starts is enough.
    const deviceOnly = order.firstOf.includes(name);
    if (deviceOnly && deviceStarted) continue;
    const missing = unavailable[name];
    if (missing) {
      failures.set(name, `${name} failed to start: ${missing}`);
      continue;
    }
    try {
      started.set(name, await startChecked(name, options, faults, hooks));
      if (deviceOnly) deviceStarted = true;
    } catch (error) {
      // gpu.js words a refused `new Function` as a missing method: the cause goes first.
      const cause = name === 'cpu' && isCodeGenerationRefused() ? `${CODE_GENERATION_REFUSED} (gpu.js said: ${describe(error)})` : describe(error);
      failures.set(name, `${name} failed to start: ${cause}`);
    }
  }

  const healthy = (): BackendName[] => [...started.keys()].filter((b) => !failures.has(b));
  const deviceOnly = hooks.deviceOnly ?? {};
  /** The backend for one call: the requested one, or auto's rule among healthy backends. */
  const choose = (operation: Operation, n: number): { impl: BackendImpl; reason: string | null } => {
    const preferred: BackendName =
      requested === 'auto' ? pickBackend(platform, operation, n, ['codec', ...wanted]) : requested;
    // Host operations under auto leave out what is offered for decodeToDevice only.
    const offered = (b: BackendName) => operation === 'decodeToDevice' || deviceOnly[b] === undefined;
    const actual: BackendName = requested === 'auto' ? pickBackend(platform, operation, n, healthy().filter(offered)) : preferred;
    const impl = failures.has(actual) ? codec : (started.get(actual) ?? codec);
    const left = requested === 'auto' && !offered(preferred) ? deviceOnly[preferred] : undefined;
    const reason = impl.name === preferred ? null : (left ?? failures.get(preferred) ?? `${preferred} is not available`);
    return { impl, reason };
  };

  /** Runs a call; a backend failure (not bad input) marks it failed and reruns on the codec. */
  async function run<T extends { backend: BackendName; fallbackReason: string | null }>(
    operation: Operation,
    n: number,
    call: (impl: BackendImpl) => Promise<T>,
    callerArrays: Readonly<Record<string, unknown>> = {},
    checkArguments?: () => void,
  ): Promise<T> {
    const lengths = Object.entries(callerArrays).map(([name, view]) => [name, view, byteLengthOf(view)] as const);
    const { impl, reason } = choose(operation, n);
    if (impl === codec) {
      const result = await call(codec);
      result.fallbackReason = reason;
      return result;
    }
    // The codec's rules before another backend, which would take a caller's exception for its own
    // failure; the codec applies them itself (checked twice, a header parse cost small decodes ~20 %).
    checkArguments?.();
    try {
      if (faults.failLaunches) throw new KernelsError('KERNEL_FAILED', 'injected fault: launch failed (device lost)', {});
      return await call(impl);
    } catch (error) {
      // The caller's mistakes (bad input, arrays transferred mid-call) are errors, not a broken backend.
      if (isSplitZipError(error) || (isKernelsError(error) && (error.code === 'INVALID_ARGUMENT' || error.code === 'DISPOSED'))) throw error;
      const changed = lengths.find(([, view, length]) => byteLengthOf(view) !== length);
      if (changed !== undefined) {
        throw new KernelsError('INVALID_ARGUMENT', `${changed[0]} was detached or resized while the call was in flight`, { argument: changed[0] });
      }
      failures.set(impl.name, `${impl.name} failed during ${operation}: ${describe(error)}`);
      const result = await call(codec);
      result.fallbackReason = failures.get(impl.name)!;
      return result;
    }
  }

  let disposed = false;
  /** DISPOSED before the arguments are looked at, as the options are: a disposed instance takes no call. */
  const assertNotDisposed = (): void => {
    if (disposed) throw new KernelsError('DISPOSED', 'this Kernels instance was disposed', {});
  };
  /** The backend a decode of `expectedElementCount` values runs on now, and why it is not the one asked for. */
  const current = (): { backend: BackendName; reason: string | null } => {
    const { impl, reason } = choose('decode', expected);
    if (requested === 'auto') return { backend: impl.name, reason };
    return { backend: impl.name, reason: impl.name === requested ? null : (failures.get(requested) ?? null) };
  };

  return {
    // Current, not snapshots: after a backend failed during a call, every call runs on codec, and
    // these named the failed backend with no reason.
    get backend() {
      return current().backend;
    },
    get fallbackReason() {
      return current().reason;
    },
    get availableBackends() {
      return healthy();
    },
    get disposed() {
      return disposed;
    },
    // Each call's arguments are checked by the codec's rules before a backend other than codec sees
    // them (the codec checks them itself): bad input is the codec's typed error on every backend,
    // never a backend marked failed.
    async decode<TBuffer extends ArrayBufferLike = ArrayBuffer>(payload: Uint8Array, out?: Uint16Array<TBuffer>, options?: DecodeOptions): Promise<DecodeResult<TBuffer>> {
      const read = checkDecodeOptions(options, 'decode');
      assertNotDisposed();
      checkPayloadArray(payload);
      // Its kind before the header (the codec looks after it), so the codec path names it too.
      checkOutputKind(out);
      // Every backend returns `out` itself, or without it a new ordinary array (checkOutput, the codec's decode).
      const result = await run('decode', elementCountOf(payload), (impl) => impl.decode(payload, out, read), { payload, out }, () => checkDecodeArguments(payload, out));
      return result as DecodeResult<TBuffer>;
    },
    async encode(values: Uint16Array, codebook: Codebook, options?: EncodeOptions): Promise<EncodeResult> {
      checkEncodeOptions(options, 'encode');
      assertNotDisposed();
      // The checked codebook and chunk size go on: a caller's getter is read once, here.
      const { book, chunkSize } = checkEncodeArguments(values, codebook, options?.chunkSize);
      return run('encode', values.length, (impl) => impl.encode(values, book, { chunkSize }), { values });
    },
    async decodeToDevice(payload: Uint8Array, options?: DecodeOptions): Promise<DeviceDecodeResult> {
      const read = checkDecodeOptions(options, 'decodeToDevice');
      assertNotDisposed();
      checkPayloadArray(payload);
      return run('decodeToDevice', elementCountOf(payload), (impl) => impl.decodeToDevice(payload, read), { payload }, () => checkDecodeArguments(payload, undefined));
    },
    async dispose() {
      if (disposed) return;
      disposed = true;
      for (const impl of started.values()) await impl.dispose().catch(() => undefined);
    },
  };
}

/**
 * Starts a backend and runs the known-answer decode and encode; disposes it on failure. webgpu:
 * the native WGSL decoder for decode and decodeToDevice, gpu.js's webgpu kernels for encode, both
 * on gpu.js's shared device (gpu.js's webgpu decode kernel is never built: it cannot read bytes).
 */
async function startChecked(name: GpuBackendName, options: CreateKernelsOptions, faults: TestFaults, hooks: PlatformHooks): Promise<BackendImpl> {
  if (faults.failStart) throw new KernelsError('BACKEND_UNAVAILABLE', 'injected fault: start failed', { backend: name });
  const gpu: GpuBackend = await startGpuBackend(name, { webasmThreads: options.webasmThreads === true });
  let impl = createGpuBackendImpl(gpu);
  try {
    if (name === 'webgpu') {
      const { device } = await gpujs.WebGPUContext.acquire();
      const webgpu = options.webgpu ?? {};
      const offload = webgpu.checksumWorker === false ? null : (hooks.createChecksumOffload?.(webgpu) ?? null);
      const decoder = await createWebGpuDecoder(device as unknown as GpuDeviceNative, webgpu, offload).catch(async (error: unknown) => {
        await offload?.dispose();
        throw error;
      });
      impl = createWebGpuBackendImpl(decoder, impl);
    }
    const check = getSelfCheckCase();
    const { values } = await impl.decode(check.payload, undefined, undefined);
    if (faults.corruptSelfCheck) values[7] = values[7]! ^ 1;
    const wrong = firstDifference(values, check.values);
    if (wrong >= 0) {
      throw new KernelsError('SELF_CHECK_FAILED', `known-answer decode differs at value ${wrong}`, {
        backend: name,
        index: wrong,
        expected: check.values[wrong],
        got: values[wrong],
      });
    }
    const { payload } = await impl.encode(check.values, check.codebook, { chunkSize: check.chunkSize });
    const wrongByte = firstDifference(payload, check.payload);
    if (wrongByte >= 0) {
      throw new KernelsError('SELF_CHECK_FAILED', `known-answer encode differs at byte ${wrongByte}`, { backend: name, offset: wrongByte });
    }
    return impl;
  } catch (error) {
    await impl.dispose().catch(() => undefined);
    throw error;
  }
}

function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/** The element count from the header when it has one (for auto's size rule); 0 otherwise (the checks then report the error). */
function elementCountOf(payload: Uint8Array): number {
  if (!isUint8Array(payload) || payload.length < 24) return 0;
  const view = new DataView(payload.buffer, payload.byteOffset, 24);
  return view.getUint32(16, true) + view.getUint32(20, true) * 2 ** 32;
}

/** A view's byteLength (0 once its buffer is detached), or -1 for anything else. */
function byteLengthOf(view: unknown): number {
  return ArrayBuffer.isView(view) ? view.byteLength : -1;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
