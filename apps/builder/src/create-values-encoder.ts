import { createRequire } from 'node:module';
import { createCodebook, encode } from '@splitzip/codec';
import type { EncodeBackend } from './encode-backends.js';
import type { EncodeValues } from './tensor-tasks.js';
import { startWorker } from '@splitzip/kernels/start-worker';

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
 * why) when one fails its start-up self-check. `auto` is the kernels' measured rule: when the rule
 * picks the codec to encode at every size whatever else could run (read from the rule's own entry,
 * which loads no backend code), the codec is used directly and nothing else starts; otherwise a
 * short-lived worker asks the kernels which backends start here, so that gpu.js (~18 MB) is only
 * loaded into this process when `auto` may pick one of them.
 */
export async function createValuesEncoder(requested: EncodeBackend): Promise<ValuesEncoder> {
  if (requested === 'codec') return codecEncoder;
  if (requested === 'auto' && (await ruleEncodesWithCodecOnly())) return codecEncoder;
  if (requested === 'auto' && (await probeAutoBackends()).every((name) => name === 'codec')) return codecEncoder;
  const { createKernels } = await import('@splitzip/kernels/node');
  const kernels = await createKernels({ backend: requested });
  return {
    // Read when asked, as the kernels report them: after a backend fails mid-build every encode runs
    // on codec, and the report named the failed backend with no reason.
    get backend() {
      return kernels.backend;
    },
    get fallbackReason() {
      return kernels.fallbackReason;
    },
    encode: async (values, exponents, chunkSize) => (await kernels.encode(values, createCodebook(exponents), { chunkSize })).payload,
    isCodec: false,
    dispose: () => kernels.dispose(),
  };
}

/**
 * Whether `auto` encodes with the codec at every size (2^0..2^32 values) even with every backend
 * the rule could start available: then no backend is worth starting (this saved a worker that
 * loaded gpu.js, ~0.5 CPU-s and the critical path of small builds). The same test the probe ran.
 */
export async function ruleEncodesWithCodecOnly(): Promise<boolean> {
  const { candidateBackends, pickBackend } = await import('@splitzip/kernels/auto-rule');
  const all = ['codec' as const, ...candidateBackends('node')];
  for (let log2 = 0; log2 <= 32; log2++) {
    if (pickBackend('node', 'encode', 2 ** log2, all) !== 'codec') return false;
  }
  return true;
}

/**
 * The backends `auto` has available (started and self-checked), asked of the kernels in a worker
 * (so gpu.js stays out of this process when the codec is what runs anyway).
 */
async function probeAutoBackends(): Promise<string[]> {
  const kernelsPath = createRequire(import.meta.url).resolve('@splitzip/kernels/node');
  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    (async () => {
      const api = require(workerData);
      const kernels = await api.createKernels({ backend: 'auto' });
      const names = [...kernels.availableBackends];
      await kernels.dispose();
      parentPort.postMessage(names);
    })().catch((error) => parentPort.postMessage({ error: String(error && error.message || error) }));`;
  const worker = startWorker(source, { eval: true, workerData: kernelsPath });
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
