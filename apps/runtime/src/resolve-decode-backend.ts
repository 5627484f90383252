import { createCpuDecoder, type DecodeBackend } from './create-cpu-decoder.js';
import { RuntimeError } from './errors.js';

/**
 * How a caller picks the decoder:
 * - `'cpu'` / `'auto'`: the codec's fast path on the calling thread, sliced (see createCpuDecoder);
 * - a `DecodeBackend` object: anything else (a worker pool, a GPU decoder with read-back, a test
 *   backend that fails on purpose).
 */
export type BackendOption = 'auto' | 'cpu' | DecodeBackend;

export function resolveDecodeBackend(option: BackendOption | undefined): DecodeBackend {
  if (option === undefined || option === 'auto' || option === 'cpu') return createCpuDecoder();
  if (typeof option === 'object' && option !== null && typeof option.decode === 'function') return option;
  throw new RuntimeError('INVALID_ARGUMENT', `unknown decode backend ${String(option)}`, { backend: String(option) });
}
