import { computeTensorByteSize } from './compute-tensor-byte-size.js';
import { describeShapeProblem } from './check-header-arguments.js';
import { isSafetensorsDtype } from './dtypes.js';
import { checkTensorSpecs } from './check-tensor-specs.js';
import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';
import type { TensorToWrite } from './types.js';

/** Before anything is written: every tensor's data must be a Uint8Array of exactly shape x dtype bytes. */
export function checkTensorData(tensors: readonly TensorToWrite[], file: string): void {
  checkTensorSpecs(tensors, file);
  for (const tensor of tensors) {
    if (!(tensor.data instanceof Uint8Array)) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', 'data is not a Uint8Array', { file, tensor: typeof tensor.name === 'string' ? tensor.name : quoteValue(tensor.name) });
    }
    if (!isSafetensorsDtype(tensor.dtype)) continue; // the header serializer names the exact problem
    const shapeProblem = describeShapeProblem(tensor.shape);
    if (shapeProblem !== undefined) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', `shape${shapeProblem}`, { file, tensor: typeof tensor.name === 'string' ? tensor.name : quoteValue(tensor.name) });
    }
    const size = computeTensorByteSize(tensor.shape, tensor.dtype);
    if (size.byteSize !== undefined && size.byteSize !== tensor.data.length) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', `data has ${tensor.data.length} bytes, shape [${tensor.shape.join(', ')}] of ${tensor.dtype} needs ${size.byteSize}`, {
        file,
        tensor: tensor.name,
        offsets: { expected: size.byteSize, actual: tensor.data.length },
      });
    }
  }
}
