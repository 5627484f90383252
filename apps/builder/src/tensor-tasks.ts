// The CPU work done on one BF16 tensor on the worker threads (and in process for `--jobs 0`): the
// codec's calibration and, on the codec path, the encoding and (for an s3:// cache) the blob's SHA-256. It imports no
// @splitzip/store main entry (the workers would load its S3 client: +26 MB and ~0.3 CPU-s each);
// the content key comes from its `content-key` entry, in hash-worker.ts.
import { calibrateFromHistogram, computePayloadLayout, countExponents, createCodebook, encode, readPayloadMeta } from '@splitzip/codec';
import type { PayloadDigest } from '@splitzip/store';
import { digestHex } from '@splitzip/store/content-key';

export type EncodeValues = (values: Uint16Array, exponents: readonly number[], chunkSize: number) => Promise<Uint8Array>;

/** Where to encode a tensor that passes the gate: `out` holds worstPayloadBytes (pooled memory). */
export interface EncodeInto {
  out: Uint8Array;
  chunkSize: number;
  /** Also take the payload's SHA-256 (the store's blob_sha256; an s3:// cache needs it). Default true. */
  digest?: boolean;
}

export interface TensorCalibration {
  /** Top-16 coverage of the exponents. */
  coverage: number;
  /** The calibrated codebook, or null when the tensor fails the coverage gate. */
  exponents: number[] | null;
  /** Values whose exponent is not in the codebook (sizes the payload before encoding). */
  escapeCount: number;
}

/**
 * The largest payload of `valueCount` values that passes the gate (escapes are at most a
 * 1 - coverageMin share of them): what a buffer to encode into must hold.
 */
export function worstPayloadBytes(valueCount: number, coverageMin: number, chunkSize: number): number {
  return computePayloadLayout(valueCount, Math.min(valueCount, Math.ceil(valueCount * (1 - coverageMin))), chunkSize).totalBytes;
}

/** The calibration, and with `into` the payload (a view of `into.out`) with its blob digest. */
export type CalibratedPayload = TensorCalibration & { payload: Uint8Array | null; payloadDigest: PayloadDigest | null };

/**
 * Calibrates and, with `into`, encodes a tensor that passes the gate straight into `into.out`
 * (its exact size is known from the calibration: one pass, no allocation), then, unless
 * `into.digest` is false, takes the blob's SHA-256 while the payload is at hand, for the store
 * (which then need not hash it on the thread that commits). `payload` is a view of `into.out`, or null (gate failed, or no `into`).
 */
export function calibrateAndEncode(bytes: Uint8Array, coverageMin: number, into?: EncodeInto): CalibratedPayload {
  const calibration = calibrateTensor(bytes, coverageMin);
  if (!into || calibration.exponents === null) return { ...calibration, payload: null, payloadDigest: null };
  const payload = encode(viewBf16(bytes), createCodebook(calibration.exponents), {
    chunkSize: into.chunkSize,
    out: into.out,
    escapeCount: calibration.escapeCount,
  });
  return { ...calibration, payload, payloadDigest: into.digest === false ? null : digestPayload(payload) };
}

/** The store's PayloadDigest of a payload: the header fields name exactly the bytes hashed. */
export function digestPayload(payload: Uint8Array): PayloadDigest {
  const { checksum, compBytes } = readPayloadMeta(payload);
  return { sha256: digestHex('sha256', payload.subarray(0, compBytes)), checksum, compBytes };
}

/**
 * The BF16 values in `byteLength` raw bytes. Plain arithmetic, never a 32-bit operator: byte counts
 * reach 2^32 and beyond (the store's MAX_RAW_BYTES is 2 x (2^32 - 1)), and `byteLength >>> 1` made
 * a tensor of exactly 2^32 bytes (2^31 values) an empty view: its payload held 0 values, which the
 * store refused after the whole tensor had been read and encoded, and `stats` counted 0 exponents.
 */
export function bf16ValueCount(byteLength: number): number {
  return Math.floor(byteLength / 2);
}

/** A BF16 view of raw little-endian bytes (the buffers here are allocated 2-byte aligned). */
export function viewBf16(bytes: Uint8Array): Uint16Array {
  return new Uint16Array(bytes.buffer, bytes.byteOffset, bf16ValueCount(bytes.byteLength));
}

/**
 * Calibrates: the codebook, or null below the gate. No digest of the raw bytes here: the content
 * key (a worker computes it first) is the entry's digest of them.
 */
export function calibrateTensor(bytes: Uint8Array, coverageMin: number): TensorCalibration {
  const { codebook, coverage, escapeCount } = calibrateFromHistogram(countExponents(viewBf16(bytes)));
  return { coverage, exponents: coverage < coverageMin ? null : [...codebook.exponents], escapeCount };
}
