import { checkByteArray } from './check-byte-array.js';
import { checkHeaderContext, checkStringArgument } from './check-header-arguments.js';
import { computeTensorByteSize } from './compute-tensor-byte-size.js';
import { isSafetensorsDtype } from './dtypes.js';
import { SafetensorsError } from './errors.js';
import { scanSafetensorsHeaderJson } from './find-duplicate-json-key.js';
import { findLoneSurrogateString } from './find-lone-surrogate.js';
import { HEADER_PREFIX_BYTES, MAX_HEADER_BYTES, MAX_TENSOR_RANK } from './limits.js';
import { quoteValue } from './quote-value.js';
import type { ParsedHeader, ParsedTensorEntry } from './types.js';

export interface HeaderContext {
  /** Used in error messages only. */
  fileName: string;
  /** Size of the whole file in bytes. */
  fileBytes: number;
}

const METADATA_KEY = '__metadata__';
const ENTRY_FIELDS = 3; // dtype, shape, data_offsets

// fatal: bad UTF-8 throws instead of becoming U+FFFD; ignoreBOM: a BOM stays and fails JSON.parse.
const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Rules 1-3: reads N from the first 8 bytes (u64 little-endian) and checks it against
 * MAX_HEADER_BYTES and the file size, as a 64-bit integer before converting it to a number.
 * `prefix` may be the whole file or just its start.
 */
export function parseHeaderLengthPrefix(prefix: Uint8Array, context: HeaderContext): number {
  checkHeaderContext(context, 'parseHeaderLengthPrefix');
  const file = context.fileName;
  checkByteArray(prefix, 'prefix', file);
  if (prefix.length < HEADER_PREFIX_BYTES || context.fileBytes < HEADER_PREFIX_BYTES) {
    throw new SafetensorsError('HEADER_LENGTH_MISSING', `file has ${context.fileBytes} bytes, fewer than the 8-byte header length`, {
      file,
      offsets: { expected: HEADER_PREFIX_BYTES, actual: Math.min(prefix.length, context.fileBytes) },
    });
  }
  const view = new DataView(prefix.buffer, prefix.byteOffset, HEADER_PREFIX_BYTES);
  const length = view.getBigUint64(0, true);
  if (length > BigInt(MAX_HEADER_BYTES)) {
    throw new SafetensorsError('HEADER_TOO_LARGE', `header length ${length} exceeds MAX_HEADER_BYTES (${MAX_HEADER_BYTES})${describeTextPrefix(prefix)}`, {
      file,
      offsets: { expected: MAX_HEADER_BYTES, actual: bigToNumber(length), actualDecimal: String(length) },
    });
  }
  const headerBytes = Number(length);
  // Both operands are small safe integers here, so the sum cannot overflow.
  if (HEADER_PREFIX_BYTES + headerBytes > context.fileBytes) {
    throw new SafetensorsError('HEADER_OUT_OF_BOUNDS', `header of ${headerBytes} bytes runs past the end of the ${context.fileBytes}-byte file`, {
      file,
      offsets: { expected: context.fileBytes - HEADER_PREFIX_BYTES, actual: headerBytes, position: HEADER_PREFIX_BYTES },
    });
  }
  return headerBytes;
}

/** Printable ASCII, tab, LF, CR: what a text file's first bytes are, and a length prefix's never are. */
function isTextByte(byte: number): boolean {
  return (byte >= 0x20 && byte < 0x7f) || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

/**
 * For HEADER_TOO_LARGE only (the rule and its order unchanged): 8 text bytes read as a length are
 * always over MAX_HEADER_BYTES (the top byte is >= 0x09). A Git LFS pointer (`version https://git-lfs...`)
 * or an HTML error page saved under a `.safetensors` name is the usual cause; the message says so.
 */
function describeTextPrefix(prefix: Uint8Array): string {
  const first = prefix.subarray(0, HEADER_PREFIX_BYTES);
  if (!first.every(isTextByte)) return '';
  const text = String.fromCharCode(...first);
  const guess = text.startsWith('version ')
    ? 'a Git LFS pointer: run `git lfs pull` (or download the file itself)'
    : text.trimStart().startsWith('<')
      ? 'an HTML or error page saved in place of the file: download it again'
      : 'a Git LFS pointer (run `git lfs pull`) or an HTML/error page (download it again)';
  return `; the file starts with text (${quoteValue(text)}), not a safetensors length prefix: it looks like ${guess}`;
}

/**
 * Rules 3-16 on the N header bytes (everything between the prefix and the data section). Pure: no I/O.
 * Throws SafetensorsError, and nothing else, on any bad input.
 */
export function parseSafetensorsHeader(headerBytes: Uint8Array, context: HeaderContext): ParsedHeader {
  checkHeaderContext(context, 'parseSafetensorsHeader');
  const file = context.fileName;
  checkByteArray(headerBytes, 'headerBytes', file);
  const headerLength = headerBytes.length;
  if (headerLength > MAX_HEADER_BYTES) {
    throw new SafetensorsError('HEADER_TOO_LARGE', `header length ${headerLength} exceeds MAX_HEADER_BYTES (${MAX_HEADER_BYTES})`, {
      file,
      offsets: { expected: MAX_HEADER_BYTES, actual: headerLength },
    });
  }
  if (HEADER_PREFIX_BYTES + headerLength > context.fileBytes) {
    throw new SafetensorsError('HEADER_OUT_OF_BOUNDS', `header of ${headerLength} bytes runs past the end of the ${context.fileBytes}-byte file`, {
      file,
      offsets: { expected: context.fileBytes - HEADER_PREFIX_BYTES, actual: headerLength, position: HEADER_PREFIX_BYTES },
    });
  }
  const dataStartBytes = HEADER_PREFIX_BYTES + headerLength;
  const dataBytes = context.fileBytes - dataStartBytes;

  let text: string;
  try {
    text = utf8Decoder.decode(headerBytes);
  } catch (cause) {
    throw new SafetensorsError('HEADER_INVALID_UTF8', 'header is not valid UTF-8', { file, cause, offsets: { position: HEADER_PREFIX_BYTES } });
  }
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (cause) {
    throw new SafetensorsError('HEADER_INVALID_JSON', `header is not JSON (${describe(cause)})`, { file, cause });
  }
  // As the reference implementation (serde_json refuses an escaped lone surrogate): such a name is no Unicode text.
  const lone = findLoneSurrogateString(text, root);
  if (lone !== undefined) {
    throw new SafetensorsError('HEADER_INVALID_JSON', `header is not JSON text: string ${quoteValue(lone)} holds a lone surrogate escape`, { file });
  }
  if (root === null || typeof root !== 'object' || Array.isArray(root)) {
    throw new SafetensorsError('HEADER_NOT_OBJECT', `header is JSON ${root === null ? 'null' : Array.isArray(root) ? 'array' : typeof root}, not an object`, { file });
  }
  // One pass over the text: repeated keys, and numbers spelled 1.0, 1e0 or -0 (rules 11-12).
  const { duplicate, floatSpelled } = scanSafetensorsHeaderJson(text);
  if (duplicate) {
    // `tensor` is the tensor whose entry (or name) repeats; a key of __metadata__ has none. `key` is the key.
    const owner = duplicate.path.length === 0 ? duplicate.key : duplicate.path[0];
    const tensor = owner === '__metadata__' ? undefined : owner;
    const where = duplicate.path.length === 0 ? 'the header' : tensor === undefined ? '__metadata__' : `the entry of tensor ${quoteValue(tensor)}`;
    throw new SafetensorsError('HEADER_DUPLICATE_KEY', `key ${quoteValue(duplicate.key)} appears twice in one object of ${where}`, {
      file,
      ...(tensor !== undefined ? { tensor } : {}),
      key: duplicate.key,
      offsets: { position: duplicate.position },
    });
  }

  const record = root as Record<string, unknown>;
  // Rule 8 before any entry, wherever the key sits in the header; then rules 9-14 entry by entry, in header order.
  const metadata = Object.hasOwn(record, METADATA_KEY) ? validateMetadata(record[METADATA_KEY], file) : null;
  const tensors: ParsedTensorEntry[] = [];
  for (const name of Object.keys(record)) {
    if (name !== METADATA_KEY) tensors.push(validateEntry(name, record[name], file, floatSpelled?.get(name)));
  }

  // Rules 15-16: sorted by (begin, end), the tensors must tile [0, dataBytes) exactly.
  tensors.sort((a, b) => a.dataOffsets[0] - b.dataOffsets[0] || a.dataOffsets[1] - b.dataOffsets[1]);
  let expected = 0;
  let previous: ParsedTensorEntry | undefined;
  for (const tensor of tensors) {
    const [begin, end] = tensor.dataOffsets;
    if (begin !== expected) {
      const code = begin > expected ? 'DATA_HOLE' : 'DATA_OVERLAP';
      // An overlap names both tensors (tied weights saved as one range are the usual cause).
      const what =
        begin > expected
          ? `leaves a hole of ${begin - expected} bytes before it`
          : `overlaps ${quoteValue(previous?.name)} [${previous?.dataOffsets[0]}, ${expected}] by ${expected - begin} bytes`;
      throw new SafetensorsError(code, `data_offsets [${begin}, ${end}] ${what} (expected begin ${expected})`, {
        file,
        tensor: tensor.name,
        ...(code === 'DATA_OVERLAP' && previous !== undefined ? { otherTensor: previous.name } : {}),
        offsets: { begin, end, expected, actual: begin, position: dataStartBytes + begin },
      });
    }
    expected = end;
    previous = tensor;
  }
  if (expected !== dataBytes) {
    const last = tensors.length > 0 ? tensors[tensors.length - 1] : undefined;
    const lastContext = last ? { tensor: last.name } : {};
    if (expected < dataBytes) {
      throw new SafetensorsError('DATA_TRAILING_BYTES', `tensors end at ${expected} but the data section has ${dataBytes} bytes`, {
        file,
        ...lastContext,
        offsets: { expected: dataBytes, actual: expected, position: dataStartBytes + expected },
      });
    }
    // The header is whole (rules 1-15 held) but the data is short: the file was cut off.
    throw new SafetensorsError('DATA_OUT_OF_BOUNDS', `tensors end at ${expected}, past the ${dataBytes}-byte data section: the file looks truncated (an interrupted download or copy?); fetch it again`, {
      file,
      ...lastContext,
      offsets: { ...(last ? { begin: last.dataOffsets[0], end: last.dataOffsets[1] } : {}), expected: dataBytes, actual: expected },
    });
  }
  return { headerBytes: headerLength, dataStartBytes, dataBytes, metadata, tensors };
}

/** Rules 1-16 on a whole file held in memory (tests, browsers). Views, does not copy, the tensor bytes. */
export function parseSafetensorsBytes(fileBytes: Uint8Array, fileName: string): ParsedHeader {
  checkStringArgument(fileName, 'fileName');
  checkByteArray(fileBytes, 'fileBytes', fileName);
  const context = { fileName, fileBytes: fileBytes.length };
  const headerLength = parseHeaderLengthPrefix(fileBytes, context);
  return parseSafetensorsHeader(fileBytes.subarray(HEADER_PREFIX_BYTES, HEADER_PREFIX_BYTES + headerLength), context);
}

function validateMetadata(value: unknown, file: string): Record<string, string> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new SafetensorsError('METADATA_INVALID', '__metadata__ is not an object', { file, tensor: METADATA_KEY });
  }
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    if (typeof item !== 'string') {
      throw new SafetensorsError('METADATA_INVALID', `__metadata__[${quoteValue(key)}] is ${typeof item}, not a string`, { file, tensor: METADATA_KEY });
    }
    // defineProperty: a key named "__proto__" stays an own property instead of changing the prototype.
    Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** `floatSpelled`: the entry's fields holding a number spelled 1.0, 1e0 or -0 (scanSafetensorsHeaderJson). */
function validateEntry(name: string, value: unknown, file: string, floatSpelled: ReadonlySet<string> | undefined): ParsedTensorEntry {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new SafetensorsError('TENSOR_ENTRY_INVALID', 'tensor entry is not an object', { file, tensor: name });
  }
  const entry = value as Record<string, unknown>;
  const keys = Object.keys(entry);
  if (keys.length !== ENTRY_FIELDS || !Object.hasOwn(entry, 'dtype') || !Object.hasOwn(entry, 'shape') || !Object.hasOwn(entry, 'data_offsets')) {
    throw new SafetensorsError('TENSOR_ENTRY_INVALID', `tensor entry must have exactly dtype, shape and data_offsets (has ${quoteValue(keys)})`, {
      file,
      tensor: name,
    });
  }
  const dtype = entry.dtype;
  if (!isSafetensorsDtype(dtype)) {
    throw new SafetensorsError('TENSOR_UNKNOWN_DTYPE', `unknown dtype ${quoteValue(dtype)}`, { file, tensor: name });
  }
  const shapeValue = entry.shape;
  if (!Array.isArray(shapeValue) || shapeValue.length > MAX_TENSOR_RANK) {
    throw new SafetensorsError('TENSOR_INVALID_SHAPE', Array.isArray(shapeValue) ? `rank ${shapeValue.length} exceeds MAX_TENSOR_RANK (${MAX_TENSOR_RANK})` : 'shape is not an array', {
      file,
      tensor: name,
    });
  }
  const shape: number[] = new Array<number>(shapeValue.length);
  for (let d = 0; d < shapeValue.length; d++) {
    const dim: unknown = shapeValue[d];
    if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 0) {
      throw new SafetensorsError('TENSOR_INVALID_SHAPE', `shape[${d}] = ${quoteValue(dim)} is not a non-negative safe integer`, { file, tensor: name });
    }
    shape[d] = dim;
  }
  if (floatSpelled?.has('shape')) {
    throw new SafetensorsError('TENSOR_INVALID_SHAPE', 'shape spells a number with a fraction or exponent (1.0, 1e0) or as -0: not an integer as the reference implementation reads it', { file, tensor: name });
  }
  const offsetsValue = entry.data_offsets;
  if (!Array.isArray(offsetsValue) || offsetsValue.length !== 2) {
    throw new SafetensorsError('TENSOR_INVALID_OFFSETS', 'data_offsets is not an array of two integers', { file, tensor: name });
  }
  const begin: unknown = offsetsValue[0];
  const end: unknown = offsetsValue[1];
  if (
    typeof begin !== 'number' ||
    typeof end !== 'number' ||
    !Number.isSafeInteger(begin) ||
    !Number.isSafeInteger(end) ||
    begin < 0 ||
    end < begin
  ) {
    throw new SafetensorsError('TENSOR_INVALID_OFFSETS', `data_offsets ${quoteValue(offsetsValue)} are not two ordered non-negative safe integers`, {
      file,
      tensor: name,
      ...(typeof begin === 'number' && typeof end === 'number' ? { offsets: { begin, end } } : {}),
    });
  }
  if (floatSpelled?.has('data_offsets')) {
    throw new SafetensorsError('TENSOR_INVALID_OFFSETS', 'data_offsets spells a number with a fraction or exponent (1.0, 1e0) or as -0: not an integer as the reference implementation reads it', {
      file,
      tensor: name,
      offsets: { begin, end },
    });
  }
  const size = computeTensorByteSize(shape, dtype);
  if (size.reason === 'not-byte-aligned') {
    throw new SafetensorsError('TENSOR_BITS_NOT_BYTE_ALIGNED', `shape [${shape.join(', ')}] of ${dtype} is not a whole number of bytes`, {
      file,
      tensor: name,
      offsets: { begin, end },
    });
  }
  if (size.byteSize !== end - begin) {
    const expectedText = size.byteSize === undefined ? 'more than Number.MAX_SAFE_INTEGER' : String(size.byteSize);
    throw new SafetensorsError('TENSOR_SPAN_MISMATCH', `shape [${shape.join(', ')}] of ${dtype} needs ${expectedText} bytes but data_offsets span ${end - begin}`, {
      file,
      tensor: name,
      offsets: { begin, end, actual: end - begin, ...(size.byteSize !== undefined ? { expected: size.byteSize } : {}) },
    });
  }
  return { name, dtype, shape, dataOffsets: [begin, end] };
}

function bigToNumber(value: bigint): number {
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(value);
}

function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}
