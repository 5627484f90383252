import { SafetensorsError } from './errors.js';
import { checkFitsOneBuffer, getModelReader, resolveTensor } from './model-reader.js';
import { quoteValue } from './quote-value.js';
import type { SafetensorsModel, TensorInfo } from './types.js';

/**
 * Reads one tensor's bytes with positioned reads. With `target`, fills its first `sizeBytes` bytes and
 * returns that view (TARGET_TOO_SMALL if it is shorter); without, allocates exactly `sizeBytes`
 * (a size that passed validation; TENSOR_TOO_LARGE above MAX_BUFFER_BYTES, which no buffer can hold).
 */
export function readTensorBytes(model: SafetensorsModel, tensor: TensorInfo | string): Promise<Uint8Array<ArrayBuffer>>;
/** With `target`: the view of its first `sizeBytes` bytes, over the same buffer as `target`. */
export function readTensorBytes<Buffer extends ArrayBufferLike>(model: SafetensorsModel, tensor: TensorInfo | string, target: Uint8Array<Buffer>): Promise<Uint8Array<Buffer>>;
export function readTensorBytes(model: SafetensorsModel, tensor: TensorInfo | string, target?: Uint8Array): Promise<Uint8Array>;
export async function readTensorBytes(model: SafetensorsModel, tensor: TensorInfo | string, target?: Uint8Array): Promise<Uint8Array> {
  const reader = getModelReader(model);
  const info = resolveTensor(model, tensor);
  const { shardName, offsetBytes, sizeBytes } = info.slice;
  let view: Uint8Array;
  if (target !== undefined) {
    if (!(target instanceof Uint8Array)) {
      throw new SafetensorsError('INVALID_ARGUMENT', `target must be a Uint8Array or undefined, got ${quoteValue(target)}`, { file: info.shardPath, tensor: info.name });
    }
    if (target.length < sizeBytes) {
      throw new SafetensorsError('TARGET_TOO_SMALL', `target holds ${target.length} bytes, the tensor needs ${sizeBytes}`, {
        file: info.shardPath,
        tensor: info.name,
        offsets: { expected: sizeBytes, actual: target.length, position: offsetBytes },
      });
    }
    view = target.subarray(0, sizeBytes);
  } else {
    checkFitsOneBuffer(info);
    view = new Uint8Array(sizeBytes);
  }
  await reader.readAt(shardName, view, offsetBytes, info.name);
  return view;
}
