// Two writers adding one key to an s3:// cache at once: the entry object is created only if absent
// (If-None-Match: *), so exactly one of them answers `added: true` (a build counts the tensor as new
// by it). The interleaving is forced: writer A has listed (the key absent) and PUT its blob; writer B
// adds the key before A's entry PUT.
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { makeTensor, toInput } from './helpers.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

type Put = (name: string, body: Uint8Array, contentType?: string) => Promise<void>;

/**
 * Runs `between` once, after `store`'s first blob PUT (its listing is done); every blob PUT of the
 * store waits for it, so none of its entry PUTs comes before it.
 */
function afterFirstBlobPut(store: CacheStore, between: () => Promise<void>): void {
  const transport = (store as unknown as { transport: { putObject: Put } }).transport;
  const put = transport.putObject.bind(transport);
  let held: Promise<void> | undefined;
  transport.putObject = async (name, body, contentType) => {
    await put(name, body, contentType);
    if (name.startsWith('blobs/')) await (held ??= between());
  };
}

describeS3('S3 store: two writers adding one key', () => {
  const bucket = uniqueBucket('addrace');
  const client = rawClient();
  let run = 0;
  const shard = 'model-00001-of-00002.safetensors';
  const s1 = [shard, 0, 80] as [string, number, number];
  const s2 = [shard, 80, 80] as [string, number, number];

  useTestBucket(client, bucket);

  async function twoWriters(): Promise<{ url: string; prefix: string; a: CacheStore; b: CacheStore }> {
    const prefix = `r${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const a = await openCacheStore(url, { create: true });
    const b = await openCacheStore(url);
    return { url, prefix, a, b };
  }

  async function entryObjects(prefix: string): Promise<string[]> {
    const { ListObjectsV2Command } = await import('@aws-sdk/client-s3');
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}entries/` }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
  }

  it('the writer whose entry PUT comes second answers added: false and binds only the slices still unbound', async () => {
    const t = makeTensor([40], 701);
    const { url, prefix, a, b } = await twoWriters();
    let rb: Awaited<ReturnType<CacheStore['addEntries']>> | undefined;
    afterFirstBlobPut(a, async () => {
      rb = await b.addEntries([toInput(t, 'layer0.w', [s1])]);
    });
    const ra = await a.addEntries([toInput(t, 'layer0.w', [s1, s2])]);
    expect(rb).toEqual([{ key: t.key, added: true, slicesBound: 1 }]);
    // Before 2026-12-07 both answered added: true (and A counted s1 bound too).
    expect(ra).toEqual([{ key: t.key, added: false, slicesBound: 1 }]);
    const blobSha = createHash('sha256').update(t.payload).digest('hex');
    expect(await entryObjects(prefix)).toEqual([`entries/${t.key}.${blobSha}.json`]);
    const reader = await openCacheStore(url);
    try {
      expect(reader.lookupBySlice(...s1)?.key).toBe(t.key);
      expect(reader.lookupBySlice(...s2)?.key).toBe(t.key);
      expect((await reader.verify()).problems).toEqual([]);
    } finally {
      await reader.close();
    }
    // A's own view shows the entry and both bindings.
    expect(a.lookupBySlice(...s2)?.key).toBe(t.key);
    await Promise.all([a.close(), b.close()]);
  });

  it('a batch racing on one key of two: only that key is not added', async () => {
    const [t1, t2] = [makeTensor([40], 711), makeTensor([40], 712)];
    const { a, b } = await twoWriters();
    afterFirstBlobPut(a, async () => {
      await b.addEntries([toInput(t1, 'layer0.w')]);
    });
    const ra = await a.addEntries([toInput(t1, 'layer0.w'), toInput(t2, 'layer1.w')]);
    expect(ra.map((r) => [r.key, r.added])).toEqual(
      [
        [t1.key, false],
        [t2.key, true],
      ],
    );
    await Promise.all([a.close(), b.close()]);
  });

  it('an existing entry object of that name that cannot be read is replaced, and the writer counts the entry as added', async () => {
    const t = makeTensor([40], 721);
    const { url, prefix, a } = await twoWriters();
    const blobSha = createHash('sha256').update(t.payload).digest('hex');
    afterFirstBlobPut(a, async () => {
      // Damaged, or written in a layout this release refuses.
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}entries/${t.key}.${blobSha}.json`, Body: '{"not":"an entry"}\n' }));
    });
    expect(await a.addEntries([toInput(t, 'layer0.w', [s1])])).toEqual([{ key: t.key, added: true, slicesBound: 1 }]);
    const reader = await openCacheStore(url);
    try {
      expect(reader.lookupBySlice(...s1)?.key).toBe(t.key);
      expect((await reader.verify()).problems).toEqual([]);
    } finally {
      await reader.close();
    }
    await a.close();
  });
});
