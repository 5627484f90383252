import { SAFETENSORS_DTYPES, isSafetensorsDtype, type SafetensorsDtype } from './dtypes.js';
import { SafetensorsError } from './errors.js';
import { findClosestName } from './find-closest-name.js';
import { MAX_TENSOR_RANK } from './limits.js';
import { quoteValue } from './quote-value.js';

// Argument checks of the pure header entry (./header), whose functions promise to throw
// SafetensorsError and nothing else: a caller's bad argument is INVALID_ARGUMENT naming it ("got …"),
// never a TypeError from deep inside, nor a caller bug reported as file damage (a fileBytes of '100'
// read as a 100-byte file gave HEADER_OUT_OF_BOUNDS; NaN gave "a NaN-byte file").

/**
 * What is wrong with a shape, as words that follow its name (" has rank 65, …"), or undefined for
 * an array of at most MAX_TENSOR_RANK non-negative safe integers. One test for computeTensorByteSize
 * and the writers' screens: a writer that screened less handed computeTensorByteSize a shape it
 * refuses, and a rank-65 tensor failed as a bare INVALID_ARGUMENT naming no file or tensor.
 * Indexed, not every(): every() skips a sparse array's holes.
 */
export function describeShapeProblem(shape: unknown): string | undefined {
  if (!Array.isArray(shape)) return ` must be an array of non-negative safe integers, got ${quoteValue(shape)}`;
  if (shape.length > MAX_TENSOR_RANK) return ` has rank ${shape.length}, over MAX_TENSOR_RANK (${MAX_TENSOR_RANK})`;
  for (let d = 0; d < shape.length; d++) {
    const dim: unknown = shape[d];
    if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 0) return `[${d}] must be a non-negative safe integer, got ${quoteValue(dim)}`;
  }
  return undefined;
}

/** A shape argument: an array of at most MAX_TENSOR_RANK non-negative safe integers. */
export function checkShapeArgument(shape: unknown, argument: string): asserts shape is readonly number[] {
  const problem = describeShapeProblem(shape);
  if (problem !== undefined) throw new SafetensorsError('INVALID_ARGUMENT', `${argument}${problem}`);
}

/** A dtype argument: one of SAFETENSORS_DTYPES, with the nearest name suggested (dtype names are case-sensitive). */
export function checkDtypeArgument(dtype: unknown, argument: string): asserts dtype is SafetensorsDtype {
  if (isSafetensorsDtype(dtype)) return;
  const near = typeof dtype === 'string' ? findClosestName(dtype, SAFETENSORS_DTYPES) : undefined;
  const hint = near === undefined ? '' : `: did you mean ${quoteValue(near)}? (dtype names are case-sensitive)`;
  throw new SafetensorsError('INVALID_ARGUMENT', `${argument} must be a safetensors dtype (${SAFETENSORS_DTYPES.join(', ')}), got ${quoteValue(dtype)}${hint}`);
}

/** A string argument (a file name used in messages, JSON text). */
export function checkStringArgument(value: unknown, argument: string): asserts value is string {
  if (typeof value !== 'string') throw new SafetensorsError('INVALID_ARGUMENT', `${argument} must be a string, got ${quoteValue(value)}`);
}

/** A HeaderContext { fileName, fileBytes }: fileName a string, fileBytes a non-negative safe integer. */
export function checkHeaderContext(context: unknown, call: string): asserts context is { fileName: string; fileBytes: number } {
  if (context === null || typeof context !== 'object') {
    throw new SafetensorsError('INVALID_ARGUMENT', `${call}: context must be an object { fileName, fileBytes }, got ${quoteValue(context)}`);
  }
  const { fileName, fileBytes } = context as { fileName?: unknown; fileBytes?: unknown };
  if (typeof fileName !== 'string') {
    throw new SafetensorsError('INVALID_ARGUMENT', `${call}: context.fileName must be a string, got ${quoteValue(fileName)}`);
  }
  if (typeof fileBytes !== 'number' || !Number.isSafeInteger(fileBytes) || fileBytes < 0) {
    throw new SafetensorsError('INVALID_ARGUMENT', `${call}: context.fileBytes must be a non-negative safe integer (the whole file's size), got ${quoteValue(fileBytes)}`, {
      file: fileName,
    });
  }
}
