import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';
import type { TensorSpec } from './types.js';

/**
 * The writers' tensor list: an array (INVALID_ARGUMENT) of objects (WRITE_INVALID_TENSOR naming the
 * position). null and {} threw a TypeError, [null] too, and 'ab' was read as tensors "a" and "b".
 */
export function checkTensorSpecs(specs: unknown, file: string): asserts specs is readonly TensorSpec[] {
  if (!Array.isArray(specs)) {
    throw new SafetensorsError('INVALID_ARGUMENT', `tensors must be an array, got ${quoteValue(specs)}`, { file });
  }
  for (const [i, spec] of specs.entries()) {
    if (spec === null || typeof spec !== 'object') {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', `tensors[${i}] is ${quoteValue(spec)}, not an object { name, dtype, shape }`, { file });
    }
  }
}
