import { readPayloadMeta, verifyPayloadChecksum, type PayloadMeta } from '@splitzip/codec';
import type { PayloadEntryFields } from './create-cpu-decoder.js';
import { describeError, RuntimeError } from './errors.js';

/**
 * The checks the store's `readBlob` makes, for payload bytes the runtime read itself (through a
 * custom `ByteReader`): header valid, header equal to the manifest's meta and codebook, checksum
 * equal to the manifest's copy and to the bytes (unless `checksum: false`: the decode backend
 * verifies the bytes itself). Runs on decode threads too (only codec and plain data). Throws `CACHE_ENTRY_MISMATCH` when the blob and
 * its entry disagree, `CACHE_READ_FAILED` when the blob itself is invalid.
 */
export function checkPayloadAgainstEntry(payload: Uint8Array, entry: PayloadEntryFields, blobPath: string, options: { checksum?: boolean } = {}): PayloadMeta {
  const context = { key: entry.key, qualname: entry.qualname, blob: blobPath };
  let meta: PayloadMeta;
  try {
    meta = readPayloadMeta(payload);
  } catch (error) {
    throw new RuntimeError('CACHE_READ_FAILED', `blob ${blobPath}: invalid payload header: ${describeError(error).message}`, context, {
      cause: error,
    });
  }
  const expected = entry.meta;
  const disagreements: string[] = [];
  const compare = (field: string, actual: number, wanted: number) => {
    if (wanted !== actual) disagreements.push(`${field}: blob ${actual}, manifest ${wanted}`);
  };
  compare('version', meta.version, expected.version);
  compare('elementCount', meta.elementCount, expected.elementCount);
  compare('chunkSize', meta.chunkSize, expected.chunkSize);
  compare('escapeCount', meta.escapeCount, expected.escapeCount);
  compare('compBytes', meta.compBytes, entry.compBytes);
  compare('rawBytes', meta.rawBytes, entry.rawBytes);
  compare('checksum', meta.checksum, expected.checksum);
  const blobExponents = meta.codebook.exponents;
  const entryExponents = entry.codebook.exponents;
  if (blobExponents.length !== entryExponents.length || blobExponents.some((value, i) => value !== entryExponents[i])) {
    disagreements.push('codebook');
  }
  if (disagreements.length > 0) {
    throw new RuntimeError('CACHE_ENTRY_MISMATCH', `blob ${blobPath} disagrees with its manifest entry (${disagreements.join('; ')})`, {
      ...context,
      disagreements,
    });
  }
  if (options.checksum === false) return meta; // the decode backend verifies it (off this thread)
  try {
    verifyPayloadChecksum(payload, meta);
  } catch (error) {
    throw new RuntimeError('CACHE_READ_FAILED', `blob ${blobPath}: ${describeError(error).message}`, context, { cause: error });
  }
  return meta;
}
