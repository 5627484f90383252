import { activeKernels } from './backend.js';
import { layoutFor, isValidChunkSize } from './compute-payload-layout.js';
import { DEFAULT_CHUNK_SIZE, HEADER_OFFSET, MAX_ELEMENT_COUNT } from './constants.js';
import { ensureCodebook, type Codebook } from './create-codebook.js';
import { tablesForCodebook } from './decode-core.js';
import { SplitZipError } from './errors.js';
import { computePayloadChecksum, writePayloadHeader, writeU32 } from './payload-header.js';

export interface EncodeOptions {
  /** Values per chunk: a power of two in 64..65536 (default 1024). */
  chunkSize?: number;
  /**
   * The number of values whose exponent is not in the codebook, when already known (e.g.
   * `calibrateFromHistogram(...).escapeCount` for these values): saves the counting pass. A wrong
   * count costs a second pass, never a wrong payload.
   */
  escapeCount?: number;
}

/** Encodes BF16 bit patterns into one aligned SplitZip payload (FORMAT.md). */
export function encode(values: Uint16Array, codebook: Codebook, options?: EncodeOptions): Uint8Array {
  if (!(values instanceof Uint16Array)) {
    throw new SplitZipError('INVALID_ARGUMENT', 'values must be a Uint16Array of BF16 bit patterns', {});
  }
  if (values.length > MAX_ELEMENT_COUNT) {
    throw new SplitZipError('INVALID_ARGUMENT', `at most ${MAX_ELEMENT_COUNT} values per payload`, {
      elementCount: values.length,
    });
  }
  const chunkSize = options?.chunkSize ?? DEFAULT_CHUNK_SIZE;
  if (!isValidChunkSize(chunkSize)) {
    throw new SplitZipError('INVALID_ARGUMENT', 'chunkSize must be a power of two in 64..65536', { chunkSize });
  }
  const hint = options?.escapeCount;
  if (hint !== undefined && (!Number.isInteger(hint) || hint < 0 || hint > values.length)) {
    throw new SplitZipError('INVALID_ARGUMENT', 'escapeCount must be an integer in 0..values.length', {
      escapeCount: hint,
      elementCount: values.length,
    });
  }
  const book = ensureCodebook(codebook);
  const tables = tablesForCodebook(book.exponents);
  const kernels = activeKernels();
  // Escapes sit last in the layout, but the payload's length depends on their count: count first
  // unless the caller knows it.
  const escapeCount = hint ?? kernels.countEscapes(values, tables);
  const layout = layoutFor(values.length, escapeCount, chunkSize);
  const payload = new Uint8Array(layout.totalBytes);
  writePayloadHeader(payload, values.length, escapeCount, chunkSize, book, layout);
  const result = kernels.encodeSections(
    values,
    tables,
    payload,
    {
      codes: layout.codes.offsetBytes,
      sm: layout.sm.offsetBytes,
      escapeIndex: layout.escapeIndex.offsetBytes,
      escapePositions: layout.escapePositions.offsetBytes,
      escapeExponents: layout.escapeExponents.offsetBytes,
      chunkSize,
      escapeCount,
    },
    true,
  );
  if (result.escapes !== escapeCount) {
    // Only a wrong escapeCount hint gets here: encode again with the count measured.
    return encode(values, book, { chunkSize });
  }
  const checksum = result.checksum ?? kernels.checksum?.(payload, layout.totalBytes) ?? computePayloadChecksum(payload, layout.totalBytes);
  writeU32(payload, HEADER_OFFSET.checksum, checksum);
  return payload;
}
