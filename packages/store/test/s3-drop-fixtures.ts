// What the s3:// drop and gc suites (s3-drop-*, s3-gc-recheck-order) set up alike: a bucket of the
// file's own with raw object access beside the store, a test tensor's object names, a store holding
// tensors under a fresh prefix, a drop's intent made by hand, and a handle's clock run ahead.
// (s3-helpers.ts holds what every S3 suite shares; this is the drop's and gc's intents on top.)
import { createHash } from 'node:crypto';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { DROP_INTENT_STALE_MS, encodeDropIntent } from '../src/s3-drop-intents.js';
import { dropIntentObjectName, sliceObjectName, stampObjectName } from '../src/s3-layout.js';
import type { S3Transport } from '../src/s3-transport.js';
import { toInput, type TestTensor } from './helpers.js';
import { rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

/** The shard name the suites' slices are in. */
export const SHARD = 'model-00001-of-00001.safetensors';

/** A drop id for intents made by hand (DROP_ID_HEX_CHARS hex). */
export const TEST_DROP_ID = '0123456789ab';

/** The store's transport (a private field), whose methods the suites replace to force interleavings. */
export function transportOf(store: CacheStore): S3Transport {
  return (store as unknown as { transport: S3Transport }).transport;
}

/** This handle's clock `aheadMs` ahead (the ages it judges): ages as they will be then. */
export function runAhead(store: CacheStore, aheadMs: number): void {
  const transport = transportOf(store);
  const now = transport.judgingNowMs.bind(transport);
  transport.judgingNowMs = () => now() + aheadMs;
}

/** This handle's clock past DROP_INTENT_STALE_MS ahead: every intent is stale to it. */
export function runPastStale(store: CacheStore): void {
  runAhead(store, DROP_INTENT_STALE_MS + 60_000);
}

const blobSha256 = (t: TestTensor): string => createHash('sha256').update(t.payload).digest('hex');

/** `t`'s entry object name, relative to the cache prefix. */
export function entryName(t: TestTensor): string {
  return `entries/${t.key}.${blobSha256(t)}.json`;
}

/** `t`'s blob object name, relative to the cache prefix. */
export function blobName(t: TestTensor): string {
  return `blobs/${t.key}.${blobSha256(t)}.bin`;
}

/** A test file's bucket and what its tests do to objects in it beside a store (keys are full keys). */
export interface DropBucket {
  bucket: string;
  client: S3Client;
  /** A cache prefix (`<letter><n>/`) no other test of the file uses, and its s3:// URL. */
  nextCache(): { prefix: string; url: string };
  /** A new cache under nextCache() holding `tensors` (qualname → tensor, added in that order). */
  storeHolding(tensors: Record<string, TestTensor>): Promise<{ prefix: string; url: string; store: CacheStore }>;
  putRaw(key: string, body?: Uint8Array): Promise<unknown>;
  deleteRaw(key: string): Promise<unknown>;
  getRaw(key: string): Promise<Uint8Array>;
  /** The object names below `prefix` + `under`, relative to `prefix`, sorted. */
  listNames(prefix: string, under?: string): Promise<string[]>;
  /**
   * `t` bound at SHARD 0+80000 (an alias object at epoch 0) with a stamp object of that binding, as
   * a loader leaves them, under `prefix`. Returns the stamp object's name (relative to `prefix`).
   */
  bindWithStamp(prefix: string, t: TestTensor): Promise<string>;
  /**
   * A drop's intent object for `t`'s entry under `prefix`: `body`, or by default encodeDropIntent
   * of the entry object's bytes judged a second ago. Returns its name (relative to `prefix`).
   */
  putIntent(prefix: string, t: TestTensor, body?: Uint8Array): Promise<string>;
  /**
   * What a drop leaves between its entry DELETE and its put back (or killed there): putIntent's
   * intent, then `t`'s entry object deleted. Returns the intent's name.
   */
  leaveIntent(prefix: string, t: TestTensor, body?: Uint8Array): Promise<string>;
}

/** The bucket of one test file (made before its tests, dropped after them) named by `tag`; cache prefixes start with `letter`. */
export function useDropBucket(tag: string, letter = 'p'): DropBucket {
  const bucket = uniqueBucket(tag);
  const client = rawClient();
  useTestBucket(client, bucket);
  let run = 0;
  const putRaw = (key: string, body: Uint8Array = new Uint8Array(0)) => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  const deleteRaw = (key: string) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
  const getRaw = async (key: string): Promise<Uint8Array> => (await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body!.transformToByteArray();
  const nextCache = (): { prefix: string; url: string } => {
    const prefix = `${letter}${run++}/`;
    return { prefix, url: `s3://${bucket}/${prefix}` };
  };
  const putIntent = async (prefix: string, t: TestTensor, body?: Uint8Array): Promise<string> => {
    const intent = dropIntentObjectName(entryName(t), TEST_DROP_ID);
    await putRaw(`${prefix}${intent}`, body ?? encodeDropIntent(await getRaw(`${prefix}${entryName(t)}`), Date.now() - 1000));
    return intent;
  };
  return {
    bucket,
    client,
    nextCache,
    async storeHolding(tensors) {
      const { prefix, url } = nextCache();
      const store = await openCacheStore(url, { create: true });
      await store.addEntries(Object.entries(tensors).map(([qualname, t]) => toInput(t, qualname)));
      return { prefix, url, store };
    },
    putRaw,
    deleteRaw,
    getRaw,
    async listNames(prefix, under = '') {
      const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}${under}` }));
      return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
    },
    async bindWithStamp(prefix, t) {
      await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, t.key)}`);
      const stamp = stampObjectName([SHARD, 0, 80000], t.key, `etag:"${'c'.repeat(32)}"`, prefix);
      await putRaw(`${prefix}${stamp}`);
      return stamp;
    },
    putIntent,
    async leaveIntent(prefix, t, body) {
      const intent = await putIntent(prefix, t, body);
      await deleteRaw(`${prefix}${entryName(t)}`);
      return intent;
    },
  };
}
