// The `./worker-decoder` export: the worker-thread decoder alone, without gpu.js or Dawn (`./node`
// loads gpu.js, about 135 ms), so that a loader can create the pool, and have its options checked,
// when its caller asks for it instead of at the first decode.
export {
  createWorkerDecoder,
  DEFAULT_MIN_PARALLEL_ELEMENTS,
  MAX_WORKER_THREADS,
  type VerifyChecksumOptions,
  type WorkerDecodeOptions,
  type WorkerDecoder,
  type WorkerDecoderOptions,
} from './create-worker-decoder.js';
export { KernelsError, isKernelsError, type KernelsErrorCode } from './errors.js';
// The worker-script rule the runtime's decode threads share (their own error class, their words).
export { findWorkerScriptProblem, type WorkerScriptProblem } from './find-worker-script-problem.js';
