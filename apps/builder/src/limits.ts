import { MAX_ELEMENT_COUNT } from '@splitzip/codec';
import { MAX_BUFFER_BYTES } from '@splitzip/safetensors';

/**
 * Largest BF16 tensor the builder caches, in bytes: one payload's values (MAX_ELEMENT_COUNT), and
 * no more than one typed array may hold, since build, stats and verify read a tensor into one
 * buffer (Node 20: 2^32 bytes, i.e. 2^31 values; later Node versions allow the whole payload).
 * A larger tensor is skipped as too large (`skipped_size`) and served raw by the runtime.
 */
export const MAX_CACHED_TENSOR_BYTES = Math.min(2 * MAX_ELEMENT_COUNT, MAX_BUFFER_BYTES);

/** Whether a BF16 tensor of `sizeBytes` is small enough to cache. */
export function isCacheableSize(sizeBytes: number): boolean {
  return sizeBytes <= MAX_CACHED_TENSOR_BYTES;
}

/** Why a BF16 tensor above MAX_CACHED_TENSOR_BYTES is not cached (verify and inspect say it). */
export const TOO_LARGE_REASON = `more than ${MAX_CACHED_TENSOR_BYTES} bytes (the largest tensor one buffer or payload holds)`;

/**
 * Most worker threads one build starts (`--jobs`, `BuildCacheOptions.jobs`): each costs ~20 MB of
 * RSS and a share of the slab's memory bound, and the work is memory-bound well before 64 cores.
 */
export const MAX_BUILD_JOBS = 64;

/**
 * Bytes of a tensor that `verify --model` reads, hashes, decodes and compares at a time (4 MiB).
 * It held the file's bytes and the decoded tensor whole beside the payload (11.6 GB of RSS for a
 * 4 GiB tensor); now two blocks of the file (one is read while the other is checked) and one of
 * decoded values. 4 MiB because it measured fastest: on a 1 GiB tensor 1.6 CPU-s at 2-4 MiB
 * against 2.0 at 8 MiB and 2.2 at 16-64 MiB (a block decoded is compared while it is still in
 * cache), and a tensor of up to 4 MiB (every one of the default model) is still read whole, in
 * one block, as before.
 */
export const VERIFY_BLOCK_BYTES = 4 * 1024 * 1024;
