// The CPU work done on one BF16 tensor on the worker threads (and in process for `--jobs 0`): the
// codec's calibration and the entry's SHA-256. It imports no @splitzip/store (the workers would
// load its S3 client: +26 MB and ~0.3 CPU-s each); the content key is computed on the main thread.
import { createHash } from 'node:crypto';
import { calibrateFromHistogram, countExponents } from '@splitzip/codec';

/**
 * Encodes one tensor. With `into`, an encoder that accepts it (`ValuesEncoder.acceptsOut`) writes
 * the payload into `into.out` (which holds `computePayloadLayout(n, escapeCount).totalBytes`) and
 * returns a view of it; the others ignore it and return a new buffer.
 */
export type EncodeValues = (
  values: Uint16Array,
  exponents: readonly number[],
  chunkSize: number,
  into?: { out: Uint8Array; escapeCount: number },
) => Promise<Uint8Array>;

export interface TensorCalibration {
  /** Top-16 coverage of the exponents. */
  coverage: number;
  /** The calibrated codebook, or null when the tensor fails the coverage gate. */
  exponents: number[] | null;
  /** SHA-256 of the original bytes (the store's second digest), when it passes the gate. */
  sha256: string | null;
  /** Values whose exponent is not in the codebook (sizes the payload before encoding). */
  escapeCount: number;
}

/** A BF16 view of raw little-endian bytes (the buffers here are allocated 2-byte aligned). */
export function viewBf16(bytes: Uint8Array): Uint16Array {
  return new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1);
}

/** Calibrates; below the gate stops there, else takes the second digest for the entry. */
export function calibrateTensor(bytes: Uint8Array, coverageMin: number): TensorCalibration {
  const { codebook, coverage, escapeCount } = calibrateFromHistogram(countExponents(viewBf16(bytes)));
  if (coverage < coverageMin) return { coverage, exponents: null, sha256: null, escapeCount };
  return { coverage, exponents: [...codebook.exponents], sha256: createHash('sha256').update(bytes).digest('hex'), escapeCount };
}
