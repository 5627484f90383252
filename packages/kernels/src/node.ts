// The Node build: everything in index.ts, with `createKernels` using the Node measurements and
// Dawn's WebGPU (when its binary loads), plus the worker-thread CPU decoder.
import { createChecksumWorker } from './create-checksum-worker.js';
import { checkCreateKernelsOptions } from './check-kernels-options.js';
import { createKernelsFor } from './create-kernels.js';
import { installNodeWebGpu } from './install-node-webgpu.js';
import type { CreateKernelsOptions, Kernels } from './types.js';

/** Node: as the browser build's createKernels, after installing Dawn's WebGPU where it loads. */
export async function createKernels(options: CreateKernelsOptions = {}): Promise<Kernels> {
  // Before Dawn is installed: `{ backend: null }` or `{ backnd: 'cpu' }` is refused, not taken as auto.
  checkCreateKernelsOptions(options);
  const backend = options.backend ?? 'auto';
  const unavailable: Record<string, string> = {};
  const deviceOnly: Record<string, string> = {};
  if (backend === 'webgpu' || backend === 'auto') {
    const status = await installNodeWebGpu();
    if (!status.available) unavailable.webgpu = status.reason ?? 'webgpu unavailable';
    else if (status.fallbackAdapter) {
      // A decode to it on llvmpipe took ~10x the codec's time; a GPU consumer still wants its buffers.
      deviceOnly.webgpu =
        "the WebGPU adapter is a software one (isFallbackAdapter: llvmpipe, SwiftShader): auto keeps it for decodeToDevice only, where a GPU consumer wants its buffers, as host decodes and encodes run faster on the codec (backend: 'webgpu' uses it for every call)";
    }
  }
  return createKernelsFor('node', options, unavailable, {
    deviceOnly,
    // The webgpu decoder checks checksums of shared-memory payloads on workers while it uploads.
    createChecksumOffload: (webgpu) =>
      createChecksumWorker({ ...(webgpu.arena ? { arena: webgpu.arena } : {}), ...(webgpu.checksumThreads ? { threads: webgpu.checksumThreads } : {}) }),
  });
}

export { ADAPTER_REQUEST_TIMEOUT_MS, installNodeWebGpu, type NodeWebGpuStatus } from './install-node-webgpu.js';
export { defaultChecksumThreads } from './create-checksum-worker.js';
export { MAX_CHECKSUM_THREADS } from './create-webgpu-decoder.js';
// createWorkerDecoder and its constants and types: the ./worker-decoder subpath's list, kept in one place.
export * from './worker-decoder-entry.js';
export { KernelsError, isKernelsError, type KernelsErrorCode } from './errors.js';
export { pickBackend, candidateBackends, MEASURED_THROUGHPUT, type Operation, type Platform, type ThroughputRow } from './auto-rule.js';
export { LAUNCH_MAX_ELEMENTS } from './kernel-sources.js';
export type * from './types.js';
