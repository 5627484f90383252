// Whether caching a BF16 tensor saves anything: its payload (FORMAT.md: a header, the codebook,
// chunk index and section padding besides the values) must be smaller than its raw bytes. A tensor
// of under 1,409 values never is, at any chunk size, nor one of 1,537-1,664 at the default chunk size
// (section padding; 64 raw bytes made a 1 KiB payload): a build with
// --skip-no-gain skips it (`skipped_no_gain`); stats shows it, verify and the runtime say so of one not cached.
import { computePayloadLayout } from '@splitzip/codec';
import { formatCount } from './format-units.js';
import { bf16ValueCount } from './tensor-tasks.js';

/** Whether the payload of `rawBytes` of BF16 with `escapeCount` escapes, in chunks of `chunkSize` values, is smaller than the raw bytes. */
export function isPayloadSmaller(rawBytes: number, escapeCount: number, chunkSize: number): boolean {
  return computePayloadLayout(bf16ValueCount(rawBytes), escapeCount, chunkSize).totalBytes < rawBytes;
}

/** Whether any payload of the tensor can be smaller than its raw bytes (none with zero escapes: skipped before reading it). */
export function canPayloadShrink(rawBytes: number, chunkSize: number): boolean {
  return isPayloadSmaller(rawBytes, 0, chunkSize);
}

/** Why a tensor whose payload would not be smaller than its raw bytes is not cached (verify says it): `1,024 bytes`, as every count. */
export function describeNoGain(rawBytes: number, escapeCount: number, chunkSize: number): string {
  const payloadBytes = computePayloadLayout(bf16ValueCount(rawBytes), escapeCount, chunkSize).totalBytes;
  return `would not shrink (skipped by build --skip-no-gain): its payload would be ${formatCount(payloadBytes)} bytes, not smaller than its ${formatCount(rawBytes)} raw bytes`;
}
