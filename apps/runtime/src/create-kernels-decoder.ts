import { markSettlingBackend } from './settling-backends.js';
import type { Kernels } from '@splitzip/kernels/node';
import { createWorkerDecoder, type WorkerDecoderOptions } from '@splitzip/kernels/worker-decoder';
import type { DecodeBackend } from './create-cpu-decoder.js';
import { RuntimeError } from './errors.js';

/**
 * A decode backend over a `@splitzip/kernels` instance (gpu.js webgpu/webgl/webasm/cpu or the
 * codec): host values out, so a GPU backend pays its upload and read-back here. For a consumer that
 * wants the tensor to stay on the GPU, use loadTensorToDevice instead.
 */
export function createKernelsDecoder(kernels: Kernels): DecodeBackend {
  return {
    get name() {
      return `kernels:${kernels.backend}`;
    },
    // A disposed instance decodes nothing more (DISPOSED): a load refuses it up front (checkBackendOpen).
    get closed() {
      return kernels.disposed === true;
    },
    async decode(payload, meta, out) {
      // The runtime verified the checksum when it staged the payload.
      const result = await kernels.decode(payload, out, { verify: false });
      if (result.values.length < meta.elementCount) {
        throw new RuntimeError('DECODE_FAILED', `kernels returned ${result.values.length} values, expected ${meta.elementCount}`, {
          backend: result.backend,
        });
      }
      if (result.values !== out) out.set(result.values.subarray(0, meta.elementCount));
    },
  };
}

/** How much of a dead worker's reason a backend name carries (a stack-free message's first line fits). */
const MAX_FAILURE_CHARS = 160;

/**
 * The kernels package's worker-thread decoder: chunk ranges of each tensor decoded in parallel on
 * `threads` workers, leaving the calling thread free to issue reads. Payloads and outputs in
 * SharedArrayBuffers avoid its copies (loadModel backs its staging pool with one for this backend).
 * The pool is created here, so its options are checked here (a bad `workerUrl` or `threads` threw
 * only at the first decode, which a load reported as each tensor's `cache-failed`); its workers
 * start on the first decode.
 */
export function createWorkerPoolDecoder(options: WorkerDecoderOptions = {}): DecodeBackend & { readonly shared: true } {
  const workers = createWorkerDecoder(options);
  // Read once, after the kernels checked it (a getter could answer differently later).
  const base = `workers:${options.threads ?? 'auto'}`;
  let closed = false;
  return markSettlingBackend({
    shared: true,
    // Dead workers named: the calling thread then decodes alone, every result right, and a bundle
    // without the worker script (or a worker that throws) looked like a healthy pool in every report.
    get name() {
      const deaths = workers.workerDeaths;
      if (deaths === 0) return base;
      const why = (workers.lastWorkerFailure ?? 'unknown').slice(0, MAX_FAILURE_CHARS);
      return `${base} (${deaths} worker${deaths === 1 ? '' : 's'} died, the calling thread decodes: ${why})`;
    },
    get closed() {
      return closed;
    },
    async decode(payload, meta, out, options) {
      if (closed) throw new RuntimeError('INVALID_ARGUMENT', 'worker decoder is closed');
      // The load's signal abandons the call (ABORTED at once). Not for a shared `out` (a caller's
      // SharedArrayBuffer): a worker finishing its range may write into it after the rejection,
      // so that decode is waited for whole, as before. An ordinary `out` only this thread writes.
      const signal = isShared(out) ? undefined : options?.signal;
      let values: Uint16Array;
      try {
        values = await workers.decode(payload.subarray(0, meta.compBytes), out, signal === undefined ? { verify: false } : { verify: false, signal });
      } catch (error) {
        // Its workers may still read the payload (a shared staging slot, read in place) until
        // idle(): the runtime keeps that slot from reuse until then.
        if (signal?.aborted === true) options?.onAbandoned?.(workers.idle());
        throw error;
      }
      if (values !== out) out.set(values.subarray(0, meta.elementCount));
    },
    async close() {
      closed = true;
      await workers.dispose();
    },
  });
}

/** Whether `values` lie in shared memory (a worker may write there without this thread). */
function isShared(values: Uint16Array): boolean {
  return typeof SharedArrayBuffer !== 'undefined' && values.buffer instanceof SharedArrayBuffer;
}
