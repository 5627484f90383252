import type { Kernels } from '@splitzip/kernels/node';
import { createCpuDecoder, type DecodeBackend } from './create-cpu-decoder.js';
import { createKernelsDecoder, createWorkerPoolDecoder } from './create-kernels-decoder.js';
import { getSharedThreadDecoder, hasThreadWorker } from './create-thread-decoder.js';
import { argumentError } from './check-load-arguments.js';
import { RuntimeError } from './errors.js';

/**
 * How a caller picks the decoder:
 * - `'auto'` (default): `'threads'` where its worker script is present (the built package), else `'cpu'`
 *   (named so: see createAutoCpuDecoder);
 * - `'cpu'`: the codec's fast path on the calling thread, sliced (see createCpuDecoder);
 * - `'threads'`: the runtime's worker threads verify and decode off the calling thread (one
 *   process-wide pool, see createThreadDecoder) — the choice when reads are slow (network, paced);
 * - `'workers'`: the kernels package's worker-thread decoder (see createWorkerPoolDecoder);
 * - a `Kernels` instance from `@splitzip/kernels` (`createKernels`): its `decode` (host values);
 * - a `DecodeBackend` object: anything else (a test backend that fails on purpose…).
 */
export type BackendOption = 'auto' | 'cpu' | 'threads' | 'workers' | Kernels | DecodeBackend;

/**
 * What `'auto'` picks without the decode threads' script: the CPU decoder, its name saying so
 * (`cpu:wasm-simd (auto: no decode-thread.js)`, in each tensor's `backend` and the totals'
 * `backends`). A bundle that inlined the runtime loses the threads this way; the name was the
 * plain `'cpu'` one, so nothing told it apart from a load that asked for `'cpu'`.
 */
function createAutoCpuDecoder(): DecodeBackend {
  const cpu = createCpuDecoder();
  // A getter (the codec's backend is read at each call), kept as it is.
  const described = Object.getOwnPropertyDescriptor(cpu, 'name');
  const cpuName = (): string => String(described?.get !== undefined ? described.get.call(cpu) : described?.value);
  return Object.defineProperty(cpu, 'name', { get: () => `${cpuName()} (${AUTO_WITHOUT_THREADS})`, enumerable: true, configurable: true });
}

/** The suffix of the backend name `'auto'` gives when it cannot start decode threads. */
export const AUTO_WITHOUT_THREADS = 'auto: no decode-thread.js';

function isKernels(value: object): value is Kernels {
  return typeof (value as Kernels).decodeToDevice === 'function' && typeof (value as Kernels).dispose === 'function';
}

export function resolveDecodeBackend(option: BackendOption | undefined): DecodeBackend {
  if (option === undefined || option === 'auto') return hasThreadWorker() ? getSharedThreadDecoder() : createAutoCpuDecoder();
  if (option === 'cpu') return createCpuDecoder();
  if (option === 'threads') return getSharedThreadDecoder();
  if (option === 'workers') return createWorkerPoolDecoder();
  if (typeof option === 'object' && option !== null) {
    if (isKernels(option)) return createKernelsDecoder(option);
    if (typeof option.decode === 'function') return option;
  }
  // Bounded: String() of an array passed by mistake joined every item into the message.
  throw argumentError('backend', "'auto', 'cpu', 'threads', 'workers', a DecodeBackend or Kernels", option);
}

/**
 * INVALID_ARGUMENT for a backend that says it is closed (DecodeBackend.closed: a closed thread
 * decoder, a closed worker pool): every tensor of a load through it was otherwise a quiet
 * `cache-failed` (DECODE_FAILED) fallback to raw, as its warmUp() already refused it.
 */
export function checkBackendOpen(backend: DecodeBackend): void {
  if (backend.closed === true) {
    throw new RuntimeError('INVALID_ARGUMENT', `decode backend ${backend.name} is closed: pass an open one (or a name: 'auto', 'threads', 'cpu')`, { option: 'backend', backend: backend.name });
  }
}

/**
 * Whether the caller that resolved `backend` from `option` must close it when done: one made here
 * from a name ('cpu', 'workers'), not the caller's own object nor the process-wide 'threads' pool.
 */
export function ownsDecodeBackend(option: BackendOption | undefined, backend: DecodeBackend): boolean {
  return typeof option !== 'object' && (backend as { processWide?: boolean }).processWide !== true;
}
