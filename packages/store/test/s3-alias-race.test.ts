// Alias writers racing on one slice of an s3:// cache, with the interleavings forced: each store's
// alias PUT is held by a hook on its transport until the other writer has reached a given point, so
// the outcome does not depend on timing. What must hold afterwards: a writer that loses leaves no
// conflict behind, a binding a writer reported is never undone by a loser, and every slice
// resolves to a key some writer bound (or to nothing, with the callers told).
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { catchError, makeTensor, toInput } from './helpers.js';
import { barrier, deferred, holdAliasPut } from './s3-alias-hooks.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

/** Holds `store`'s first alias PUT: `bAtAlias` resolves when it is reached, `aDone.resolve()` lets it go. */
function holdAliasUntilReleased(store: CacheStore): { bAtAlias: ReturnType<typeof deferred>; aDone: ReturnType<typeof deferred> } {
  const bAtAlias = deferred();
  const aDone = deferred();
  holdAliasPut(store, {
    before: async () => {
      bAtAlias.resolve();
      await aDone.promise;
    },
  });
  return { bAtAlias, aDone };
}

describeS3('S3 store: alias writers racing on one slice', () => {
  const bucket = uniqueBucket('race');
  const client = rawClient();
  let run = 0;
  const nextUrl = () => `s3://${bucket}/r${run++}/`;
  const shard = 'model-00001-of-00002.safetensors';
  const slice = [shard, 608, 80] as const;
  const item = (key: string) => ({ key, shardName: slice[0], offsetBytes: slice[1], sizeBytes: slice[2] });

  useTestBucket(client, bucket);

  /** Opens two instances of one new cache; `seed` entries are added first, without slices. */
  async function twoWriters(seed: ReturnType<typeof makeTensor>[] = []): Promise<{ url: string; a: CacheStore; b: CacheStore }> {
    const url = nextUrl();
    const a = await openCacheStore(url, { create: true });
    if (seed.length > 0) await a.addEntries(seed.map((t, i) => toInput(t, `seed${i}`)));
    const b = await openCacheStore(url);
    return { url, a, b };
  }

  async function settled(url: string): Promise<{ owner: string | undefined; problems: string[] }> {
    const reader = await openCacheStore(url);
    try {
      const report = await reader.verify();
      return { owner: reader.lookupBySlice(...slice)?.key, problems: report.problems.map((p) => p.code) };
    } finally {
      await reader.close();
    }
  }

  it('leaveTakenSlices, both alias objects written before either looks: neither fails, each leaves the slice out, no conflict is left', async () => {
    const [ta, tb] = [makeTensor([40], 501), makeTensor([40], 502)];
    const { url, a, b } = await twoWriters();
    const bothWritten = barrier(2);
    holdAliasPut(a, { after: bothWritten });
    holdAliasPut(b, { after: bothWritten });
    const [ra, rb] = await Promise.all([
      a.addEntries([{ ...toInput(ta, 'layer0.t1.weight', [[...slice]]), leaveTakenSlices: true }]),
      b.addEntries([{ ...toInput(tb, 'layer0.t1.weight', [[...slice]]), leaveTakenSlices: true }]),
    ]);
    expect(ra).toEqual([{ key: ta.key, added: true, slicesBound: 0 }]);
    expect(rb).toEqual([{ key: tb.key, added: true, slicesBound: 0 }]);
    expect(await settled(url)).toEqual({ owner: undefined, problems: [] });
    // The caller then binds it itself (the builder's --rebind), as after a sequential add.
    expect(await b.aliasSlices([item(tb.key)], { rebind: true })).toEqual([true]);
    expect(await settled(url)).toEqual({ owner: tb.key, problems: [] });
    await Promise.all([a.close(), b.close()]);
  });

  it('leaveTakenSlices: a writer whose alias lands after another writer reported its binding leaves the slice out and does not undo that binding', async () => {
    const [ta, tb] = [makeTensor([40], 511), makeTensor([40], 512)];
    const { url, a, b } = await twoWriters();
    // B looked (slice free) and wrote its entry; its alias waits until A has finished.
    const { bAtAlias, aDone } = holdAliasUntilReleased(b);
    const pendingB = b.addEntries([{ ...toInput(tb, 'layer0.t1.weight', [[...slice]]), leaveTakenSlices: true }]);
    await bAtAlias.promise;
    const ra = await a.addEntries([{ ...toInput(ta, 'layer0.t1.weight', [[...slice]]), leaveTakenSlices: true }]);
    expect(ra).toEqual([{ key: ta.key, added: true, slicesBound: 1 }]);
    aDone.resolve();
    expect(await pendingB).toEqual([{ key: tb.key, added: true, slicesBound: 0 }]);
    // A's reported binding holds: B's alias object is gone.
    expect(await settled(url)).toEqual({ owner: ta.key, problems: [] });
    await a.refresh();
    expect(a.lookupBySlice(...slice)?.key).toBe(ta.key);
    await Promise.all([a.close(), b.close()]);
  });

  it('a plain aliasSlices that loses a race throws SLICE_CONFLICT and removes its own alias object: the winner\'s binding stays, or, both losing, no conflict is left', async () => {
    const [ta, tb] = [makeTensor([40], 521), makeTensor([40], 522)];
    // A reported its binding before B's alias landed: B fails, A's binding stays.
    {
      const { url, a, b } = await twoWriters([ta, tb]);
      const { bAtAlias, aDone } = holdAliasUntilReleased(b);
      const pendingB = catchError(() => b.aliasSlices([item(tb.key)]));
      await bAtAlias.promise;
      expect(await a.aliasSlices([item(ta.key)])).toEqual([true]);
      aDone.resolve();
      const error = await pendingB;
      expect(error).toMatchObject({ code: 'SLICE_CONFLICT', details: { slice: [...slice], requestedKey: tb.key } });
      expect(await settled(url)).toEqual({ owner: ta.key, problems: [] });
      await Promise.all([a.close(), b.close()]);
    }
    // Both alias objects written before either looks: both fail, the slice is left unbound, not in conflict.
    {
      const { url, a, b } = await twoWriters([ta, tb]);
      const bothWritten = barrier(2);
      holdAliasPut(a, { after: bothWritten });
      holdAliasPut(b, { after: bothWritten });
      const errors = await Promise.all([catchError(() => a.aliasSlices([item(ta.key)])), catchError(() => b.aliasSlices([item(tb.key)]))]);
      expect(errors.map((e) => e.code)).toEqual(['SLICE_CONFLICT', 'SLICE_CONFLICT']);
      expect(await settled(url)).toEqual({ owner: undefined, problems: [] });
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('two rebinds of one slice written at the same epoch: both succeed and the slice resolves to one of their keys (last writer wins), no conflict left', async () => {
    const [old, ta, tb] = [makeTensor([40], 531), makeTensor([40], 532), makeTensor([40], 533)];
    const { url, a, b } = await twoWriters([old, ta, tb]);
    expect(await a.aliasSlices([item(old.key)])).toEqual([true]);
    await b.refresh();
    const bothWritten = barrier(2);
    holdAliasPut(a, { after: bothWritten });
    holdAliasPut(b, { after: bothWritten });
    const [ra, rb] = await Promise.all([a.aliasSlices([item(ta.key)], { rebind: true }), b.aliasSlices([item(tb.key)], { rebind: true })]);
    expect([ra, rb]).toEqual([[true], [true]]);
    const { owner, problems } = await settled(url);
    expect(problems).toEqual([]);
    expect([ta.key, tb.key]).toContain(owner);
    await Promise.all([a.close(), b.close()]);
  });
});
