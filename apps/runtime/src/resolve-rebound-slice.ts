// A bare slice request whose entry was removed since the handle's last refresh, while the slice
// itself was bound to another entry (`build --rebind` moved it to new bytes, then `gc
// --drop-unbound-entries` removed the old entry): the refresh that found the entry gone also holds
// the new binding, so the request is served from it instead of failing SLICE_NOT_FOUND.
import type { SafetensorsModel } from '@splitzip/safetensors';
import { RuntimeError } from './errors.js';
import type { ShardCache } from './open-shard-cache.js';
import { resolveTensorRequest, type TensorRequest } from './resolve-tensor-request.js';
import type { ServeTarget } from './serve-tensor.js';

/**
 * The request resolved again when `error` is the SLICE_NOT_FOUND of a bare slice whose entry was
 * removed (serve-tensor's droppedSliceError: `details.key`) and the refreshed cache binds the slice
 * to another entry; undefined otherwise (the error stands). Callers retry once: a second removal
 * meanwhile fails as any.
 */
export function resolveReboundSlice(error: unknown, request: TensorRequest, model: SafetensorsModel | undefined, cache: ShardCache | undefined): ServeTarget | undefined {
  if (!(error instanceof RuntimeError) || error.code !== 'SLICE_NOT_FOUND' || typeof error.details.key !== 'string') return undefined;
  let again: ServeTarget;
  try {
    again = resolveTensorRequest(request, model, cache);
  } catch {
    return undefined;
  }
  return again.entry !== undefined && again.entry.key !== error.details.key ? again : undefined;
}
