import { createCodebook } from '@splitzip/codec';
import { createKernels } from '@splitzip/kernels/node';
import type { EncodeValues } from './tensor-tasks.js';

export const ENCODE_BACKENDS = ['auto', 'cpu', 'webasm', 'webgpu', 'codec'] as const;
export type EncodeBackend = (typeof ENCODE_BACKENDS)[number];

export interface ValuesEncoder {
  /** The backend that actually runs (after `auto` and any start-up fallback). */
  readonly backend: string;
  /** Why the requested backend is not the one running, if so. */
  readonly fallbackReason: string | null;
  readonly encode: EncodeValues;
}

/**
 * The encoder for a requested backend, from @splitzip/kernels: `codec` is the codec's own CPU path;
 * `cpu`, `webasm` and `webgpu` are gpu.js kernels; `auto` is the kernels' measured rule. A backend
 * that fails its start-up self-check falls back to the codec path, and says why.
 */
export async function createValuesEncoder(requested: EncodeBackend): Promise<ValuesEncoder> {
  const kernels = await createKernels({ backend: requested });
  return {
    backend: kernels.backend,
    fallbackReason: kernels.fallbackReason,
    encode: async (values, exponents, chunkSize) => (await kernels.encode(values, createCodebook(exponents), { chunkSize })).payload,
  };
}
