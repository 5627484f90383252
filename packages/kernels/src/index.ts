import { createKernelsFor } from './create-kernels.js';
import type { CreateKernelsOptions, Kernels } from './types.js';

/** Starts the requested backend (or every backend `auto` may pick), each behind a known-answer self-check. */
export function createKernels(options?: CreateKernelsOptions): Promise<Kernels> {
  return createKernelsFor('browser', options);
}

export { KernelsError, isKernelsError, type KernelsErrorCode } from './errors.js';
export { pickBackend, candidateBackends, MEASURED_THROUGHPUT, type Operation, type Platform, type ThroughputRow } from './auto-rule.js';
export { LAUNCH_MAX_ELEMENTS } from './kernel-sources.js';
export type * from './types.js';
