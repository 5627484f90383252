import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { createCodebook, encode } from '@splitzip/codec';
import type { EncodeBackend } from './encode-backends.js';
import type { EncodeValues } from './tensor-tasks.js';

export interface ValuesEncoder {
  /** The backend that actually runs (after `auto` and any start-up fallback). */
  readonly backend: string;
  /** Why the requested backend is not the one running, if so. */
  readonly fallbackReason: string | null;
  readonly encode: EncodeValues;
  /**
   * True for the codec's own path, which runs on any thread: the build then encodes on its workers,
   * into pooled buffers (calibrateAndEncode), and never calls `encode`. The gpu.js kernels live on
   * the main thread and encode there.
   */
  readonly isCodec: boolean;
  dispose(): Promise<void>;
}

/** The codec's own path (what `codec` is, and what `auto` runs unless the kernels' rule says otherwise). */
export const codecEncoder: ValuesEncoder = {
  backend: 'codec',
  fallbackReason: null,
  encode: async (values, exponents, chunkSize) => encode(values, createCodebook(exponents), { chunkSize }),
  isCodec: true,
  async dispose() {},
};

/**
 * The build's encoder. `codec` is the codec's own CPU path, called directly; `cpu`, `webasm`,
 * `webgpu` are gpu.js kernels from @splitzip/kernels, which falls back to the codec path (saying
 * why) when one fails its start-up self-check. `auto` is the kernels' measured rule; when it can
 * only pick the codec path here, the codec is used directly, so that gpu.js (~18 MB) is never
 * loaded into this process: the probe runs in a short-lived worker thread.
 */
export async function createValuesEncoder(requested: EncodeBackend): Promise<ValuesEncoder> {
  if (requested === 'codec') return codecEncoder;
  if (requested === 'auto' && (await probeAutoBackends()).every((name) => name === 'codec')) return codecEncoder;
  const { createKernels } = await import('@splitzip/kernels/node');
  const kernels = await createKernels({ backend: requested });
  return {
    backend: kernels.backend,
    fallbackReason: kernels.fallbackReason,
    encode: async (values, exponents, chunkSize) => (await kernels.encode(values, createCodebook(exponents), { chunkSize })).payload,
    isCodec: false,
    dispose: () => kernels.dispose(),
  };
}

/**
 * The backends `auto` has available (started and self-checked), asked of the kernels in a worker.
 * When the kernels' measured rule picks the codec to encode at every size whatever else runs, the
 * answer is the codec alone without starting any backend: `auto` would encode with the codec anyway
 * (this saves the GPU backends' start-up and self-checks, ~0.3 s of a build).
 */
async function probeAutoBackends(): Promise<string[]> {
  const kernelsPath = createRequire(import.meta.url).resolve('@splitzip/kernels/node');
  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    (async () => {
      const api = require(workerData);
      const others = api.candidateBackends('node');
      let codecAlways = true;
      for (let log2 = 0; log2 <= 32 && codecAlways; log2++) {
        codecAlways = api.pickBackend('node', 'encode', 2 ** log2, ['codec', ...others]) === 'codec';
      }
      if (codecAlways) return parentPort.postMessage(['codec']);
      const kernels = await api.createKernels({ backend: 'auto' });
      const names = [...kernels.availableBackends];
      await kernels.dispose();
      parentPort.postMessage(names);
    })().catch((error) => parentPort.postMessage({ error: String(error && error.message || error) }));`;
  const worker = new Worker(source, { eval: true, workerData: kernelsPath });
  try {
    const answer = await new Promise<unknown>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    if (!Array.isArray(answer)) throw new Error(`backend probe failed: ${(answer as { error?: string }).error ?? 'no answer'}`);
    return answer as string[];
  } finally {
    await worker.terminate();
  }
}
