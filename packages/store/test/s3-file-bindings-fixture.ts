// Setup shared by the s3-file-bindings*.test.ts files (FILE-BINDINGS.md "Phase 2: s3://"): one
// 480-byte slice of one shard, object stamps by number, and a test bucket per describe block.
import type { S3Client } from '@aws-sdk/client-s3';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { toInput, type TestTensor } from './helpers.js';
import { rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

export const SHARD = 'model-00001-of-00002.safetensors';
export const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 } as const;
/** SLICE as a slice key. */
export const S = [SHARD, 0, 480] as const;
/** The ETag stamp of revision `n`'s shard object (another object, other bytes). */
export const etag = (n: number): string => `etag:"${String(n).padStart(32, '0')}"`;
/** A local file's stamp (not an object's). */
export const FILE = '9000:1733400000000000011:1733400000000000011:101';

/** A fresh test bucket (dropped after the block) and a raw client for it; call inside describeS3. */
export function useFileBindingsBucket(tag: string): { bucket: string; client: S3Client } {
  const bucket = uniqueBucket(tag);
  const client = rawClient();
  useTestBucket(client, bucket);
  return { bucket, client };
}

/** Creates the cache at `url` with sliceBindingsPerFile and adds each tensor as `rev<i>.weight`. */
export async function openWithRevisions(url: string, revs: readonly TestTensor[]): Promise<CacheStore> {
  const store = await openCacheStore(url, { create: true, sliceBindingsPerFile: true });
  await store.addEntries(revs.map((t, i) => toInput(t, `rev${i}.weight`)));
  return store;
}

/** The keys bound at SLICE, latest first. */
export const keysOf = (store: CacheStore): string[] => store.lookupSliceBindings(SHARD, 0, 480).map((b) => b.entry.key);

/** The store's transport, for tests that step into its listing or its reads of cache.json. */
export type Transport = { list(prefix: string): Promise<unknown>; getSmallObject(name: string, max: number): Promise<Uint8Array | undefined> };
export const transportOf = (store: CacheStore): Transport => (store as unknown as { transport: Transport }).transport;
