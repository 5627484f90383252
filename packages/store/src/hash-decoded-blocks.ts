// Decodes a checked payload a block at a time and hashes each block while it is in cache: the
// content key's SHA-1 (the store's prefix, then the bytes: the key streams) and, where one is
// recorded, the SHA-256 of the original bytes. verify({ decode: true }) decoded each entry whole:
// a 4 GiB tensor held its decoded values beside its ~3 GiB payload, ~7.3 GB at peak.
import { createHash, type Hash } from 'node:crypto';
import { decodeRange } from '@splitzip/codec';
import { StoreError } from './errors.js';

/**
 * Decoded bytes per block (1 MiB, 2^19 values). A multiple of the largest chunk (65,536 values),
 * so blocks start on chunk boundaries and no chunk's escapes are checked twice; small enough to
 * stay in a core's L2/L3 between the decode that writes it and the hashes that read it; large
 * enough that a block's fixed cost (the header read and its checks, ~µs) is noise beside its
 * decode and hashing (~1 ms). 2, 4 and 16 MiB measured no faster on the dev box.
 */
export const VERIFY_DECODE_BLOCK_BYTES = 2 ** 20;

/** What `hashDecodedBlocks` hashes the decoded values as. */
export interface DecodedTensorInfo {
  /** formatContentKeyPrefix(shape, dtype, 2 × elementCount): what the key hashes before the bytes. */
  readonly keyPrefix: string;
  readonly elementCount: number;
  /** Also compute the SHA-256 of the decoded bytes (an entry that records the original's). */
  readonly sha256: boolean;
}

export interface DecodedDigests {
  /** The content key of the decoded values (SHA-1, hex). */
  readonly key: string;
  /** Their SHA-256 (hex), when asked for; else null. */
  readonly sha256: string | null;
}

/** The running hashes of decoded values: the content key's SHA-1 (its prefix hashed first) and, where asked, the SHA-256. */
export interface DecodedHashes {
  readonly key: Hash;
  readonly sha256: Hash | null;
}

export function startDecodedHashes(tensor: DecodedTensorInfo): DecodedHashes {
  return { key: createHash('sha1').update(tensor.keyPrefix, 'utf8'), sha256: tensor.sha256 ? createHash('sha256') : null };
}

export function finishDecodedHashes(hashes: DecodedHashes): DecodedDigests {
  return { key: hashes.key.digest('hex'), sha256: hashes.sha256 === null ? null : hashes.sha256.digest('hex') };
}

/**
 * Decodes `payload` (header, checksum and meta already checked: not again per block) into `block`,
 * `block.length` values at a time, and hashes each block. Throws what a whole decode
 * (`decode(payload, out, { verify: false })`) throws for a payload that breaks a decoding rule,
 * the same error for the same payload (see firstDecodeError).
 */
export function hashDecodedBlocks(payload: Uint8Array, tensor: DecodedTensorInfo, block: Uint16Array): DecodedDigests {
  const hashes = startDecodedHashes(tensor);
  hashDecodedValues(payload, tensor.elementCount, block, hashes);
  return finishDecodedHashes(hashes);
}

/**
 * hashDecodedBlocks' decoding into running hashes: all `elementCount` values of `payload`, so that
 * the payloads of a tensor's consecutive parts (verify's bounded reads: verify-blob-in-pieces.ts)
 * hash as the whole tensor.
 */
export function hashDecodedValues(payload: Uint8Array, elementCount: number, block: Uint16Array, hashes: DecodedHashes): void {
  const n = elementCount;
  const step = block.length;
  if (n > 0 && step === 0) throw new StoreError('INVALID_ARGUMENT', 'block must hold at least one value', { details: { elementCount: n } });
  let start = 0;
  // One call at least: an empty tensor still has an escape index to check (as a whole decode does).
  do {
    const count = Math.min(step, n - start);
    let values: Uint16Array;
    try {
      values = decodeRange(payload, start, count, block.subarray(0, count), { verify: false });
    } catch (error) {
      throw firstDecodeError(payload, n, start + step, block, error);
    }
    updateBoth(hashes.key, hashes.sha256, new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
    start += count;
  } while (start < n);
}

function updateBoth(keyHash: Hash, shaHash: Hash | null, bytes: Uint8Array): void {
  keyHash.update(bytes);
  shaHash?.update(bytes);
}

export const ESCAPE_ERROR_CODES: ReadonlySet<unknown> = new Set(['BAD_ESCAPE_INDEX', 'BAD_ESCAPE_POSITION']);

/**
 * The error a whole decode reports, given a block's: a whole decode checks every chunk's escapes
 * before any code, so a code error in this block yields to a bad escape in a later one. Only on a
 * failing payload: the later blocks are decoded (into `block`) to have their escapes checked.
 */
function firstDecodeError(payload: Uint8Array, n: number, from: number, block: Uint16Array, error: unknown): unknown {
  if ((error as { code?: unknown })?.code !== 'INVALID_CODE') return error;
  for (let start = from; start < n; start += block.length) {
    const count = Math.min(block.length, n - start);
    try {
      decodeRange(payload, start, count, block.subarray(0, count), { verify: false });
    } catch (later) {
      if (ESCAPE_ERROR_CODES.has((later as { code?: unknown })?.code)) return later;
    }
  }
  return error;
}
