// aliasSlices items with `moveFrom` on an s3:// cache: a slice bound to that key is moved (one alias
// object at the top epoch + 1), an unbound one bound, one bound to a third key left alone (false,
// nothing written); a conditional write that loses a race takes its alias object back and answers
// false, never retried, never thrown. Interleavings are forced by hooks on the alias PUTs.
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { sliceObjectName } from '../src/s3-layout.js';
import { makeTensor, toInput } from './helpers.js';
import { barrier, deferred, holdAliasPut } from './s3-alias-hooks.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const SHARD = 'model-00001-of-00002.safetensors';
const ETAG = 'etag:"0123456789abcdef0123456789abcdef"';
const SLICE = [SHARD, 608, 80] as const;
const OTHER = [SHARD, 688, 80] as const;

describeS3('S3 store: aliasSlices with moveFrom', () => {
  const bucket = uniqueBucket('move-from');
  const client = rawClient();
  let run = 0;
  useTestBucket(client, bucket);

  const item = (key: string, slice: readonly [string, number, number] = SLICE, moveFrom?: string) => ({
    key,
    shardName: slice[0],
    offsetBytes: slice[1],
    sizeBytes: slice[2],
    ...(moveFrom === undefined ? {} : { moveFrom }),
  });

  async function listNames(prefix: string): Promise<string[]> {
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
  }

  /** A new cache with entries old, a, b, c (one shape); SLICE bound to old at epoch 0. Two writers. */
  async function makeCache() {
    const prefix = `m${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const [old, ta, tb, tc] = [541, 542, 543, 544].map((seed) => makeTensor([40], seed)) as [ReturnType<typeof makeTensor>, ReturnType<typeof makeTensor>, ReturnType<typeof makeTensor>, ReturnType<typeof makeTensor>];
    const a = await openCacheStore(url, { create: true });
    await a.addEntries([toInput(old, 'old.weight', [[...SLICE]]), toInput(ta, 'a.weight'), toInput(tb, 'b.weight'), toInput(tc, 'c.weight')]);
    const b = await openCacheStore(url);
    return { prefix, url, a, b, old, ta, tb, tc };
  }

  async function settled(url: string): Promise<{ owner: string | undefined; other: string | undefined; problems: string[] }> {
    const reader = await openCacheStore(url);
    try {
      const report = await reader.verify();
      return { owner: reader.lookupBySlice(...SLICE)?.key, other: reader.lookupBySlice(...OTHER)?.key, problems: report.problems.map((p) => p.code) };
    } finally {
      await reader.close();
    }
  }

  it('moves a slice bound to moveFrom (epoch + 1, its object stamp recorded) and binds an unbound one, in one call', async () => {
    const { prefix, url, a, b, old, ta } = await makeCache();
    expect(await b.aliasSlices([{ ...item(ta.key, SLICE, old.key), stamp: ETAG }, item(ta.key, OTHER, old.key)])).toEqual([true, true]);
    expect(b.lookupSliceBinding(...SLICE)).toMatchObject({ entry: { key: ta.key }, stamps: [ETAG] });
    expect(await listNames(prefix)).toContain(sliceObjectName([...SLICE], 1, ta.key));
    expect(await settled(url)).toEqual({ owner: ta.key, other: ta.key, problems: [] });
    await Promise.all([a.close(), b.close()]);
  });

  it('leaves a slice bound to a third key alone: false, nothing written, no SLICE_CONFLICT; the rest of the batch is bound', async () => {
    const { prefix, url, a, b, old, ta, tb, tc } = await makeCache();
    expect(await a.aliasSlices([item(tc.key)], { rebind: true })).toEqual([true]);
    await b.refresh();
    const before = await listNames(prefix);
    expect(await b.aliasSlices([item(ta.key, SLICE, old.key), item(tb.key, OTHER, old.key)])).toEqual([false, true]);
    const after = await listNames(prefix);
    expect(after.filter((name) => !before.includes(name))).toEqual([sliceObjectName([...OTHER], 0, tb.key)]);
    expect(await settled(url)).toEqual({ owner: tc.key, other: tb.key, problems: [] });
    await Promise.all([a.close(), b.close()]);
  });

  it('a binding another writer reports between the look and the alias PUT wins: the conditional write takes its object back and answers false', async () => {
    const { url, a, b, old, ta, tc } = await makeCache();
    // B looked (SLICE bound to old); its alias PUT waits until A has moved the slice to c and reported it.
    const atPut = deferred();
    const go = deferred();
    holdAliasPut(b, {
      before: async () => {
        atPut.resolve();
        await go.promise;
      },
    });
    const pendingB = b.aliasSlices([item(ta.key, SLICE, old.key)]);
    await atPut.promise;
    expect(await a.aliasSlices([item(tc.key)], { rebind: true })).toEqual([true]);
    go.resolve();
    expect(await pendingB).toEqual([false]);
    expect(await settled(url)).toEqual({ owner: tc.key, other: undefined, problems: [] });
    await Promise.all([a.close(), b.close()]);
  });

  it('a lost move: an item repeating it (other object stamp) answers false too, and the handle shows the winner at once, not the conflict it saw', async () => {
    const { url, a, b, old, ta, tc } = await makeCache();
    const ETAG2 = 'etag:"fedcba9876543210fedcba9876543210"';
    // Another writer's rebind lands and reports before this call's alias PUT (the runtime queues
    // one item per file stamp: two files of one shard name give two items of one slice).
    holdAliasPut(b, { before: async () => void (await a.aliasSlices([item(tc.key)], { rebind: true })) });
    const results = await b.aliasSlices([
      { ...item(ta.key, SLICE, old.key), stamp: ETAG },
      { ...item(ta.key, SLICE, old.key), stamp: ETAG2 },
    ]);
    expect(results).toEqual([false, false]);
    expect(b.lookupBySlice(...SLICE)?.key).toBe(tc.key);
    expect(await settled(url)).toEqual({ owner: tc.key, other: undefined, problems: [] });
    await Promise.all([a.close(), b.close()]);
  });

  it('a chain of moves in one call does not chain (one listing): both lose, and an item repeating the key the slice keeps answers true', async () => {
    const { url, a, b, old, ta } = await makeCache();
    // ta from old, then old back from ta: both go at the listing's epoch + 1 and lose to each other;
    // the third item's key is the one the slice keeps, which the view after the writes shows.
    expect(await b.aliasSlices([item(ta.key, SLICE, old.key), item(old.key, SLICE, ta.key), item(old.key)])).toEqual([false, false, true]);
    expect(b.lookupBySlice(...SLICE)?.key).toBe(old.key);
    expect(await settled(url)).toEqual({ owner: old.key, other: undefined, problems: [] });
    await Promise.all([a.close(), b.close()]);
  });

  it('two conditional moves from one key to two others: one binding and no conflict left, whichever way they interleave', async () => {
    // One reported before the other's PUT: it stands, the other answers false.
    {
      const { url, a, b, old, ta, tb } = await makeCache();
      const atPut = deferred();
      const go = deferred();
      holdAliasPut(b, {
        before: async () => {
          atPut.resolve();
          await go.promise;
        },
      });
      const pendingB = b.aliasSlices([item(tb.key, SLICE, old.key)]);
      await atPut.promise;
      expect(await a.aliasSlices([item(ta.key, SLICE, old.key)])).toEqual([true]);
      go.resolve();
      expect(await pendingB).toEqual([false]);
      expect(await settled(url)).toEqual({ owner: ta.key, other: undefined, problems: [] });
      await Promise.all([a.close(), b.close()]);
    }
    // Both written before either looks: both take theirs back, the slice stays with the key they moved from.
    {
      const { url, a, b, old, ta, tb } = await makeCache();
      const bothWritten = barrier(2);
      holdAliasPut(a, { after: bothWritten });
      holdAliasPut(b, { after: bothWritten });
      const results = await Promise.all([a.aliasSlices([item(ta.key, SLICE, old.key)]), b.aliasSlices([item(tb.key, SLICE, old.key)])]);
      expect(results).toEqual([[false], [false]]);
      expect(await settled(url)).toEqual({ owner: old.key, other: undefined, problems: [] });
      await Promise.all([a.close(), b.close()]);
    }
    // Unforced: at most one reports true, and the slice resolves to it (else to the key moved from).
    {
      const { url, a, b, old, ta, tb } = await makeCache();
      const [[ra], [rb]] = await Promise.all([a.aliasSlices([item(ta.key, SLICE, old.key)]), b.aliasSlices([item(tb.key, SLICE, old.key)])]);
      expect(ra && rb).toBe(false);
      const { owner, problems } = await settled(url);
      expect(problems).toEqual([]);
      expect(owner).toBe(ra ? ta.key : rb ? tb.key : old.key);
      await Promise.all([a.close(), b.close()]);
    }
  });
});
