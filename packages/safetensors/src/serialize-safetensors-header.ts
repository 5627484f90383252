import { checkStringArgument, describeShapeProblem } from './check-header-arguments.js';
import { checkTensorSpecs } from './check-tensor-specs.js';
import { computeTensorByteSize } from './compute-tensor-byte-size.js';
import { isSafetensorsDtype } from './dtypes.js';
import { hasLoneSurrogate } from './find-lone-surrogate.js';
import { SafetensorsError } from './errors.js';
import { HEADER_ALIGNMENT_BYTES, HEADER_PREFIX_BYTES, MAX_HEADER_BYTES } from './limits.js';
import { quoteValue } from './quote-value.js';
import type { ParsedTensorEntry, TensorSpec } from './types.js';

export interface SerializedHeader {
  /** Prefix + header JSON + space padding: the first `dataStartBytes` bytes of the file. */
  bytes: Uint8Array;
  /** 8 + N, a multiple of 8. */
  dataStartBytes: number;
  /** Sum of the tensors' sizes. */
  dataBytes: number;
  /** The tensors in the given order, with their data_offsets. */
  tensors: ParsedTensorEntry[];
}

const encoder = new TextEncoder();

/**
 * Builds the header of a safetensors file whose tensors are stored in the given order. Validates
 * every spec (name, dtype, shape, size) and throws WRITE_INVALID_TENSOR. Pure: no I/O.
 */
export function serializeSafetensorsHeader(
  specs: readonly TensorSpec[],
  metadata?: Readonly<Record<string, string>> | null,
  fileName = '<header>',
): SerializedHeader {
  checkStringArgument(fileName, 'fileName');
  checkTensorSpecs(specs, fileName);
  const seen = new Set<string>();
  const tensors: ParsedTensorEntry[] = [];
  // Built as text pieces: JSON.stringify of a plain object would reorder integer-like names.
  const pieces: string[] = [];
  if (metadata !== null && metadata !== undefined) {
    // A string, an array or a Map was written as {"0":"p","1":"t"}, {"0":...} or {}.
    const prototype: unknown = typeof metadata === 'object' ? Object.getPrototypeOf(metadata) : undefined;
    if (typeof metadata !== 'object' || (prototype !== Object.prototype && prototype !== null)) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', `metadata must be a plain object of strings, got ${quoteValue(metadata)}`, { file: fileName, tensor: '__metadata__' });
    }
    const metaPieces: string[] = [];
    for (const [key, value] of Object.entries(metadata)) {
      if (typeof value !== 'string') {
        throw new SafetensorsError('WRITE_INVALID_TENSOR', `metadata ${quoteValue(key)} is not a string`, { file: fileName, tensor: '__metadata__' });
      }
      if (hasLoneSurrogate(key) || hasLoneSurrogate(value)) {
        throw new SafetensorsError('WRITE_INVALID_TENSOR', `metadata ${quoteValue(key)} holds a lone surrogate (not Unicode text; readers refuse it)`, { file: fileName, tensor: '__metadata__' });
      }
      metaPieces.push(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
    }
    pieces.push(`"__metadata__":{${metaPieces.join(',')}}`);
  }
  let offset = 0;
  for (const spec of specs) {
    const { name, dtype, shape } = spec;
    if (typeof name !== 'string' || name === '__metadata__' || seen.has(name)) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', typeof name !== 'string' ? 'tensor name is not a string' : name === '__metadata__' ? 'tensor name __metadata__ is reserved' : 'tensor name appears twice', {
        file: fileName,
        tensor: typeof name === 'string' ? name : quoteValue(name),
      });
    }
    seen.add(name);
    if (hasLoneSurrogate(name)) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', 'tensor name holds a lone surrogate (not Unicode text; readers refuse it)', { file: fileName, tensor: name });
    }
    if (!isSafetensorsDtype(dtype)) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', `unknown dtype ${quoteValue(dtype)}`, { file: fileName, tensor: name });
    }
    const shapeProblem = describeShapeProblem(shape);
    if (shapeProblem !== undefined) throw new SafetensorsError('WRITE_INVALID_TENSOR', `shape${shapeProblem}`, { file: fileName, tensor: name });
    const size = computeTensorByteSize(shape, dtype);
    if (size.byteSize === undefined) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', size.reason === 'overflow' ? 'tensor size overflows' : `shape [${shape.join(', ')}] of ${dtype} is not a whole number of bytes`, {
        file: fileName,
        tensor: name,
      });
    }
    const begin = offset;
    const end = begin + size.byteSize;
    if (!Number.isSafeInteger(end)) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', 'total data size overflows', { file: fileName, tensor: name });
    }
    offset = end;
    tensors.push({ name, dtype, shape: [...shape], dataOffsets: [begin, end] });
    pieces.push(`${JSON.stringify(name)}:{"dtype":${JSON.stringify(dtype)},"shape":[${shape.join(',')}],"data_offsets":[${begin},${end}]}`);
  }
  const json = encoder.encode(`{${pieces.join(',')}}`);
  // Pad with spaces so that the data section starts on an 8-byte boundary.
  const unpadded = HEADER_PREFIX_BYTES + json.length;
  const dataStartBytes = Math.ceil(unpadded / HEADER_ALIGNMENT_BYTES) * HEADER_ALIGNMENT_BYTES;
  const headerLength = dataStartBytes - HEADER_PREFIX_BYTES;
  if (headerLength > MAX_HEADER_BYTES) {
    throw new SafetensorsError('HEADER_TOO_LARGE', `header would be ${headerLength} bytes, over MAX_HEADER_BYTES (${MAX_HEADER_BYTES})`, {
      file: fileName,
      offsets: { expected: MAX_HEADER_BYTES, actual: headerLength },
    });
  }
  const bytes = new Uint8Array(dataStartBytes);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(headerLength), true);
  bytes.set(json, HEADER_PREFIX_BYTES);
  bytes.fill(0x20, unpadded);
  return { bytes, dataStartBytes, dataBytes: offset, tensors };
}
