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

/**
 * `1,024`: an integer with thousands separators, as the builder's reports say counts (its
 * formatCount; verify's no-gain reason reads `its payload would be 1,024 bytes`). Grouped by hand,
 * not toLocaleString: the same text under any locale and any ICU build of Node.
 */
export function formatCount(count: number): string {
  if (!Number.isSafeInteger(count)) return String(count);
  const digits = String(Math.abs(count)).replace(/\B(?=(\d{3})+$)/g, ',');
  return count < 0 ? `-${digits}` : digits;
}

/** Why a miss is `no-gain`, or null where the payload would be smaller than the raw bytes. */
export function describeNoGain(rawBytes: number, escapeCount: number, chunkSize: number): string | null {
  const payloadBytes = computePayloadBytes(rawBytes, escapeCount, chunkSize);
  if (payloadBytes < rawBytes) return null;
  const escapes = escapeCount > 0 ? ` (${formatCount(escapeCount)} ${escapeCount === 1 ? 'escape' : 'escapes'})` : '';
  return `would not shrink: its payload would be ${formatCount(payloadBytes)} bytes, not smaller than its ${formatCount(rawBytes)} raw bytes${escapes}; a build with --skip-no-gain skips such tensors (skipped_no_gain), a build without it caches them if their coverage passes the gate`;
}
