import { constants } from 'node:buffer';

/**
 * Largest tensor readTensorBytes/iterateTensors can hand back: one Uint8Array holds no more (Node 20:
 * 2^32 bytes, a BF16 tensor of 2^31 values). The format allows bigger tensors, so a request for one is
 * TENSOR_TOO_LARGE, checked before allocating, instead of a RangeError from the allocation. Node-only
 * (node:buffer): it stays out of ./limits.js, which the browser-safe ./header entry reaches.
 */
export const MAX_BUFFER_BYTES: number = constants.MAX_LENGTH;

/**
 * Largest sharded-write commit record read (`.<index name>.commit`): it holds the new index's text
 * (at most MAX_INDEX_BYTES, up to twice that once escaped as a JSON string) and a few names per shard.
 */
export const MAX_COMMIT_RECORD_BYTES = 256_000_000;
