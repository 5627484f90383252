// The arrays and codebook of one call (a Kernels instance's decode, decodeToDevice and encode),
// checked by the codec's rules before any backend runs: a caller's bad input is the codec's typed
// error on every backend, and never reaches a backend, whose untyped errors mark it broken (a
// codebook whose `exponents` getter threw sent every later call to codec).
import {
  createCodebook,
  DEFAULT_CHUNK_SIZE,
  MAX_CHUNK_SIZE,
  MAX_ELEMENT_COUNT,
  MIN_CHUNK_SIZE,
  readPayloadMeta,
  SplitZipError,
  type Codebook,
} from '@splitzip/codec';
import {
  argumentTypeError,
  checkNoOverlap,
  checkReadableView,
  describeValue,
  isUint16Array,
  isUint8Array,
} from '@splitzip/codec/internal';
import { checkOutput } from './check-output.js';

/** The codec's first payload rule (readPayloadMeta's), its error naming the argument and showing what came. */
export function checkPayloadArray(payload: Uint8Array): void {
  if (!isUint8Array(payload)) throw argumentTypeError('payload', 'a Uint8Array', payload);
}

/** The codec's decode rules, in its order: the header, then `out` (kind, length, apart from the payload). */
export function checkDecodeArguments(payload: Uint8Array, out: Uint16Array | undefined): void {
  checkPayloadArray(payload);
  const meta = readPayloadMeta(payload);
  if (out !== undefined) {
    checkOutput(out, meta.elementCount);
    checkOutputApart(payload, meta.compBytes, out, meta.elementCount);
  }
}

/**
 * The codec's encode rules, in its order, so that every backend rejects exactly what the codec
 * rejects. The codebook comes back validated (frozen): the caller's object is read once, here.
 */
export function checkEncodeArguments(values: Uint16Array, codebook: Codebook, chunkSize: number | undefined): { book: Codebook; chunkSize: number } {
  if (!isUint16Array(values)) {
    throw argumentTypeError('values', 'a Uint16Array of BF16 bit patterns', values);
  }
  // A detached or out-of-bounds array reads as empty: a valid empty payload would hide the caller's bug.
  checkReadableView(values, 'values');
  if (values.length > MAX_ELEMENT_COUNT) {
    throw new SplitZipError('INVALID_ARGUMENT', `at most ${MAX_ELEMENT_COUNT} values per payload`, { argument: 'values', elementCount: values.length });
  }
  // Only undefined means the default: a null chunkSize is refused, as by the codec's encode.
  const size = chunkSize === undefined ? DEFAULT_CHUNK_SIZE : chunkSize;
  if (!Number.isInteger(size) || size < MIN_CHUNK_SIZE || size > MAX_CHUNK_SIZE || (size & (size - 1)) !== 0) {
    throw new SplitZipError('INVALID_ARGUMENT', `chunkSize must be a power of two in 64..65536, got ${describeValue(size)}`, {
      argument: 'chunkSize',
      chunkSize: size,
      got: describeValue(size),
    });
  }
  // The codec's ensureCodebook: a missing codebook said "must hold 1..16 exponents" ({ size: 0 }).
  if (codebook === null || typeof codebook !== 'object') {
    throw new SplitZipError('INVALID_CODEBOOK', `codebook must be an object with an exponents array, got ${describeValue(codebook)}`, { got: describeValue(codebook) });
  }
  return { book: createCodebook(codebook.exponents), chunkSize: size };
}

/** The codec's decode rule: INVALID_ARGUMENT when out's first `count` values share bytes with the payload's `compBytes`. */
export function checkOutputApart(payload: Uint8Array, compBytes: number, out: Uint16Array, count: number): void {
  checkNoOverlap(payload, compBytes, out, 2 * count, 'out overlaps the payload');
}
