// The CPU work done on one BF16 tensor, shared by the worker threads and the in-process path
// (`--jobs 0`). Pure composition of the store's content key and the codec's calibration.
import { createHash } from 'node:crypto';
import { calibrateFromHistogram, countExponents } from '@splitzip/codec';
import { computeContentKey } from '@splitzip/store';

export type EncodeValues = (values: Uint16Array, exponents: readonly number[], chunkSize: number) => Promise<Uint8Array>;

export interface TensorCalibration {
  /** Top-16 coverage of the exponents. */
  coverage: number;
  /** The calibrated codebook, or null when the tensor fails the coverage gate. */
  exponents: number[] | null;
  /** SHA-256 of the original bytes (the store's second digest), when it passes the gate. */
  sha256: string | null;
}

/** A BF16 view of raw little-endian bytes (the buffers here are allocated 2-byte aligned). */
export function viewBf16(bytes: Uint8Array): Uint16Array {
  return new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1);
}

/** The store's content key (SHA-1, as the seed computes it): enough to know if work is needed. */
export function hashTensor(bytes: Uint8Array, shape: readonly number[]): string {
  return computeContentKey(bytes, shape, 'BF16');
}

/** Calibrates; below the gate stops there, else takes the second digest for the entry. */
export function calibrateTensor(bytes: Uint8Array, coverageMin: number): TensorCalibration {
  const { codebook, coverage } = calibrateFromHistogram(countExponents(viewBf16(bytes)));
  if (coverage < coverageMin) return { coverage, exponents: null, sha256: null };
  return { coverage, exponents: [...codebook.exponents], sha256: createHash('sha256').update(bytes).digest('hex') };
}
