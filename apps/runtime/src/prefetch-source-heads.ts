import type { ByteSource, ByteSourceObject } from '@splitzip/safetensors';
import { isRetryableError } from './errors.js';

/**
 * Bytes fetched from the start of each shard and index when an object-store model is opened: the
 * 8-byte length prefix and, for most models, the whole JSON header (tens of KiB per shard for large
 * checkpoints) or index, in one GET instead of two. Larger headers are read as before.
 */
export const HEAD_PREFETCH_BYTES = 256 * 1024;

/** At most this many heads are prefetched (bounds memory to 64 MiB on a prefix with thousands of shards). */
export const MAX_PREFETCHED_HEADS = 256;

const isModelObject = (name: string) => !name.includes('/') && (name.endsWith('.safetensors') || name.endsWith('.safetensors.index.json'));

/** A source whose first `list()` and the heads of its model objects were fetched up front; `release()` drops the heads. */
export interface PrefetchedSource extends ByteSource {
  release(): void;
}

/**
 * Opening a model from a source is a sequence of round trips (list, then per shard: open, read the
 * length, read the header), each waiting for the last. This lists once, then opens every index and
 * `*.safetensors` object and reads its first HEAD_PREFETCH_BYTES, all at once (the source bounds the
 * requests in flight). The adapter then opens the model from the returned source as usual: the same
 * names, sizes and validations, with the reads that fall inside a head served from memory.
 */
export async function prefetchSourceHeads(source: ByteSource): Promise<PrefetchedSource> {
  const names = await source.list();
  const wanted = names.filter(isModelObject).slice(0, MAX_PREFETCHED_HEADS);
  const objects = new Map<string, { object: ByteSourceObject; head: Uint8Array | undefined }>();
  await Promise.all(
    wanted.map(async (name) => {
      const object = await source.open(name);
      if (object === undefined) return;
      const entry: { object: ByteSourceObject; head: Uint8Array | undefined } = { object, head: undefined };
      objects.set(name, entry);
      if (!Number.isSafeInteger(object.sizeBytes) || object.sizeBytes <= 0) return; // the adapter reports it
      const head = new Uint8Array(Math.min(object.sizeBytes, HEAD_PREFETCH_BYTES));
      try {
        await object.readInto(0, head);
        entry.head = head;
      } catch (error) {
        // An outage fails the open now; anything else the adapter meets again, with its own context.
        if (isRetryableError(error)) throw error;
      }
    }),
  );
  let listed: string[] | undefined = names;
  let released = false;
  return {
    url: source.url,
    async list() {
      const first = listed;
      listed = undefined;
      return first ?? source.list();
    },
    async open(name) {
      const entry = released ? undefined : objects.get(name);
      if (entry === undefined) return source.open(name);
      const { object } = entry;
      return {
        sizeBytes: object.sizeBytes,
        // The object's version: its shard's stamp (checked against the cache's bindings).
        ...(object.etag !== undefined ? { etag: object.etag } : {}),
        readInto(offsetBytes, target) {
          const head = entry.head;
          // Both are non-negative safe integers here, so the sum cannot overflow.
          if (head !== undefined && Number.isSafeInteger(offsetBytes) && offsetBytes >= 0 && offsetBytes + target.length <= head.length) {
            target.set(head.subarray(offsetBytes, offsetBytes + target.length));
            return Promise.resolve();
          }
          return object.readInto(offsetBytes, target);
        },
      };
    },
    close: () => source.close?.(),
    release() {
      released = true;
      for (const entry of objects.values()) entry.head = undefined;
      objects.clear();
    },
  };
}
