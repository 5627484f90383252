// One rule of what binds for the view, gc, the drop and its resolver (s3://, FILE-BINDINGS.md
// "Phase 2", Reading rule 3): a key with an entry object (readable or not) or a drop's intent, so
// that all cut at MAX_SLICE_BINDINGS at the same binding. The drop counted every key and the view
// only readable entries: with a higher binding's entry gone, the drop took the 8th binding the view
// served for evicted and dropped its entry.
import { DeleteObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { MAX_SLICE_BINDINGS, openCacheStore } from '../src/index.js';
import { sliceObjectName, stampObjectName } from '../src/s3-layout.js';
import { makeTensor, toInput, type TestTensor } from './helpers.js';
import { describeS3, dropBelowFloorForTests } from './s3-helpers.js';
import { etag, S, SHARD, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: one rule of what binds, at the limit', () => {
  const { bucket, client } = useFileBindingsBucket('limit-rule');
  let run = 0;

  /** MAX_SLICE_BINDINGS + 1 bindings of one slice (epochs 0..n-1, rev i with etag(i)) in a format-2 cache, written by hand. */
  async function makeFullSlice(): Promise<{ prefix: string; url: string; revs: TestTensor[]; entryName: (rev: TestTensor) => Promise<string> }> {
    const prefix = `l${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const n = MAX_SLICE_BINDINGS + 1;
    const revs = Array.from({ length: n }, (_, i) => makeTensor([40, 6], 300 + i + run * 20));
    const store = await openCacheStore(url, { create: true });
    await store.addEntries(revs.map((t, i) => toInput(t, `rev${i}.weight`)));
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}cache.json`, Body: JSON.stringify({ layout: 's3-objects', format: 2, chunk_size: store.chunkSize, coverage_min: store.coverageMin }) }));
    await store.close();
    for (let i = 0; i < n; i++) {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${stampObjectName(S, revs[i]!.key, etag(i), prefix)}`, Body: new Uint8Array(0) }));
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${sliceObjectName(S, i, revs[i]!.key)}`, Body: new Uint8Array(0) }));
    }
    const entryName = async (rev: TestTensor): Promise<string> => {
      const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}entries/${rev.key}` }));
      return out.Contents![0]!.Key!;
    };
    return { prefix, url, revs, entryName };
  }

  it('a higher binding\'s entry object gone: it binds nothing for the view and the drop alike; the lowest binding is served and its entry kept', async () => {
    const { url, revs, entryName } = await makeFullSlice();
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: await entryName(revs[4]!) }));
    const reader = await openCacheStore(url);
    try {
      expect(reader.lookupSliceBindings(SHARD, 0, 480).map((b) => b.entry.key)).toContain(revs[0]!.key);
      const report = await dropBelowFloorForTests(reader);
      expect(report.entries.map((e) => e.key)).not.toContain(revs[0]!.key);
      await reader.refresh();
      expect(reader.getEntry(revs[0]!.key)).toBeDefined();
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(0))).toMatchObject({ entry: { key: revs[0]!.key }, stamps: [etag(0)] });
    } finally {
      await reader.close();
    }
  });

  it('a higher binding\'s entry object unreadable: it counts toward the limit (not served), so the view does not serve the binding the drop takes for evicted', async () => {
    const { url, revs, entryName } = await makeFullSlice();
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: await entryName(revs[4]!), Body: 'garbage' }));
    const reader = await openCacheStore(url);
    try {
      const keys = reader.lookupSliceBindings(SHARD, 0, 480).map((b) => b.entry.key);
      expect(keys).not.toContain(revs[0]!.key);
      expect(keys).not.toContain(revs[4]!.key);
      expect(keys).toHaveLength(MAX_SLICE_BINDINGS - 1);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(0))?.entry.key).not.toBe(revs[0]!.key);
    } finally {
      await reader.close();
    }
  });
});
