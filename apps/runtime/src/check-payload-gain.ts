// The builder's rule (apps/builder check-payload-gain.ts): a build with --skip-no-gain does not cache
// a BF16 tensor whose payload would not be smaller than its raw bytes (skipped_no_gain); a miss of one
// is `no-gain` (a default build caches it if its coverage passes the gate).
import { computePayloadLayout, DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE } from '@splitzip/codec';
import { bf16ValueCount } from './bf16-value-count.js';

/** The payload bytes of `rawBytes` of BF16 with `escapeCount` escapes in chunks of the cache's `chunkSize`. */
export function computePayloadBytes(rawBytes: number, escapeCount: number, chunkSize: number): number {
  // A store wrapped by a caller may report no valid chunk size: the default's layout then.
  const valid = Number.isInteger(chunkSize) && chunkSize >= MIN_CHUNK_SIZE && chunkSize <= MAX_CHUNK_SIZE && (chunkSize & (chunkSize - 1)) === 0;
  return computePayloadLayout(bf16ValueCount(rawBytes), escapeCount, valid ? chunkSize : DEFAULT_CHUNK_SIZE).totalBytes;
}

/** Why a miss is `no-gain`, or null where the payload would be smaller than the raw bytes. */
export function describeNoGain(rawBytes: number, escapeCount: number, chunkSize: number): string | null {
  const payloadBytes = computePayloadBytes(rawBytes, escapeCount, chunkSize);
  if (payloadBytes < rawBytes) return null;
  return `would not shrink: its payload would be ${payloadBytes} bytes, not smaller than its ${rawBytes} raw bytes${escapeCount > 0 ? ` (${escapeCount} escapes)` : ''}; a build with --skip-no-gain skips such tensors (skipped_no_gain), a build without it caches them if their coverage passes the gate`;
}
