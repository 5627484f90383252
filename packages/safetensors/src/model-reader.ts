import type { FileHandle } from 'node:fs/promises';
import { SafetensorsError } from './errors.js';
import type { SafetensorsModel, TensorInfo } from './types.js';

/**
 * How readTensorBytes/iterateTensors reach a model's open files. Keyed by a registered symbol (not a
 * class identity) so the ESM and CJS builds of this package interoperate.
 */
export const MODEL_READER: unique symbol = Symbol.for('@splitzip/safetensors/model-reader') as never;

export interface ModelReader {
  /** The open handle of a shard; MODEL_CLOSED after close(). */
  handleOf(shardName: string): FileHandle;
}

export function getModelReader(model: SafetensorsModel): ModelReader {
  const reader = (model as unknown as { [MODEL_READER]?: ModelReader })[MODEL_READER];
  if (!reader) {
    throw new SafetensorsError('INVALID_ARGUMENT', 'not a model opened by openSafetensorsModel()');
  }
  return reader;
}

/** The model's own TensorInfo for a name or a TensorInfo (which must match the model's). */
export function resolveTensor(model: SafetensorsModel, tensor: TensorInfo | string): TensorInfo {
  const name = typeof tensor === 'string' ? tensor : tensor?.name;
  const found = typeof name === 'string' ? model.getTensor(name) : undefined;
  if (
    !found ||
    (typeof tensor !== 'string' &&
      (found.slice.shardName !== tensor.slice?.shardName ||
        found.slice.offsetBytes !== tensor.slice?.offsetBytes ||
        found.slice.sizeBytes !== tensor.slice?.sizeBytes))
  ) {
    throw new SafetensorsError('UNKNOWN_TENSOR', 'no such tensor in this model', { file: model.rootDir, tensor: String(name) });
  }
  return found;
}
