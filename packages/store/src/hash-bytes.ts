import { createHash, type Hash } from 'node:crypto';
import { MAX_IO_PIECE_BYTES } from './limits.js';

/**
 * Feeds `bytes` to `hash` in pieces of at most MAX_IO_PIECE_BYTES: Node's hash.update refuses one
 * input of 2^31 bytes or more (ERR_OUT_OF_RANGE "data is too long"), and a BF16 tensor of 2-4 GiB
 * (a large model's embedding) and its payload are valid inputs here.
 */
export function updateHash(hash: Hash, bytes: ArrayBufferView): Hash {
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.byteLength === 0) return hash.update(view);
  for (let from = 0; from < view.byteLength; from += MAX_IO_PIECE_BYTES) {
    hash.update(view.subarray(from, Math.min(view.byteLength, from + MAX_IO_PIECE_BYTES)));
  }
  return hash;
}

/** The hex digest of `bytes` under `algorithm` ('sha256', 'sha1', 'md5'), of any length (updateHash). */
export function digestHex(algorithm: 'sha1' | 'sha256' | 'md5', bytes: ArrayBufferView): string {
  return updateHash(createHash(algorithm), bytes).digest('hex');
}
