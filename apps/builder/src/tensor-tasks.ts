// The CPU work done on one BF16 tensor, shared by the worker threads and the in-process path
// (`--jobs 0`). Pure composition of the codec, the store's content key and the kernels' encoder.
import { createHash } from 'node:crypto';
import { calibrateFromHistogram, countExponents } from '@splitzip/codec';
import { computeContentKey } from '@splitzip/store';

export interface TensorAnalysis {
  /** The store's content key (SHA-1, as the seed computes it). */
  key: string;
  /** Top-16 coverage of the exponents. */
  coverage: number;
  /** The calibrated codebook (Top-16 by frequency). */
  exponents: number[];
  escapeCount: number;
}

export interface TensorEncoding {
  payload: Uint8Array;
  /** SHA-256 of the original bytes: the store's second digest, independent of the lookup key. */
  sha256: string;
}

/** A BF16 view of raw little-endian bytes (the buffers here are allocated 2-byte aligned). */
export function viewBf16(bytes: Uint8Array): Uint16Array {
  return new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1);
}

/** Content key and calibration: everything needed to decide whether to encode. */
export function analyzeTensor(bytes: Uint8Array, shape: readonly number[]): TensorAnalysis {
  const key = computeContentKey(bytes, shape, 'BF16');
  const { codebook, coverage, escapeCount } = calibrateFromHistogram(countExponents(viewBf16(bytes)));
  return { key, coverage, exponents: [...codebook.exponents], escapeCount };
}

export type EncodeValues = (values: Uint16Array, exponents: readonly number[], chunkSize: number) => Promise<Uint8Array>;

/** The payload and the second digest. `encodeValues` is the chosen backend's encoder. */
export async function encodeTensor(bytes: Uint8Array, exponents: readonly number[], chunkSize: number, encodeValues: EncodeValues): Promise<TensorEncoding> {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const payload = await encodeValues(viewBf16(bytes), exponents, chunkSize);
  return { payload, sha256 };
}
