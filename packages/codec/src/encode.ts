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
  const book = ensureCodebook(codebook);
  const tables = tablesForCodebook(book.exponents);
  const kernels = activeKernels();
  // Escapes sit last in the layout, but the payload's length depends on their count: count first.
  const escapeCount = kernels.countEscapes(values, tables);
  const layout = layoutFor(values.length, escapeCount, chunkSize);
  const payload = new Uint8Array(layout.totalBytes);
  writePayloadHeader(payload, values.length, escapeCount, chunkSize, book, layout);
  kernels.encodeSections(values, tables, payload, {
    codes: layout.codes.offsetBytes,
    sm: layout.sm.offsetBytes,
    escapeIndex: layout.escapeIndex.offsetBytes,
    escapePositions: layout.escapePositions.offsetBytes,
    escapeExponents: layout.escapeExponents.offsetBytes,
    chunkSize,
    escapeCount,
  });
  writeU32(payload, HEADER_OFFSET.checksum, computePayloadChecksum(payload, layout.totalBytes));
  return payload;
}
