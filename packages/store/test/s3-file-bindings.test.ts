// One binding per file on s3:// (FILE-BINDINGS.md, "Phase 2: s3://"): a handle opened with
// sliceBindingsPerFile binds an object-stamped slice beside other objects' bindings (an alias below
// the top epoch, found by its stamp objects), moves cache.json to format 2 first, evicts past
// MAX_SLICE_BINDINGS, and unbindSlices, gc and the drop keep or remove them binding by binding.
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { MAX_SLICE_BINDINGS, openCacheStore, type CacheStore } from '../src/index.js';
import { sliceObjectName, stampObjectName } from '../src/s3-layout.js';
import { catchError, makeTensor, toInput, type TestTensor } from './helpers.js';
import { barrier, deferred, holdAliasPut } from './s3-alias-hooks.js';
import { describeS3, dropBelowFloorForTests, gcBelowFloorForTests } from './s3-helpers.js';
import { etag, keysOf, openWithRevisions, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: one binding per file (object stamps)', () => {
  const { bucket, client } = useFileBindingsBucket('file-bindings');
  let run = 0;

  async function listNames(prefix: string): Promise<string[]> {
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
  }

  async function layoutFormat(prefix: string): Promise<unknown> {
    const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}cache.json` }));
    return (JSON.parse(await out.Body!.transformToString()) as { format: unknown }).format;
  }

  /** A cache holding `count` revisions' tensors of one slice (480 bytes), none bound; the handle has sliceBindingsPerFile. */
  async function makeCache(count: number): Promise<{ prefix: string; url: string; store: CacheStore; revs: TestTensor[] }> {
    const prefix = `f${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const revs = Array.from({ length: count }, (_, i) => makeTensor([40, 6], 700 + i));
    const store = await openWithRevisions(url, revs);
    return { prefix, url, store, revs };
  }

  it('binds two revisions beside each other, each found by its stamp by every reader; cache.json goes to format 2 with the second', async () => {
    const { prefix, url, store, revs } = await makeCache(2);
    const [a, b] = revs as [TestTensor, TestTensor];
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      expect(await layoutFormat(prefix)).toBe(1);
      expect(store.holdsSeveralBindings).toBe(false);
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      expect(await layoutFormat(prefix)).toBe(2);
      for (const reader of [store, await openCacheStore(url)]) {
        expect(keysOf(reader)).toEqual([b.key, a.key]);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))).toMatchObject({ entry: { key: a.key }, stamps: [etag(1)] });
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(2))).toMatchObject({ entry: { key: b.key }, stamps: [etag(2)] });
        // No stamp, or one no binding holds: the latest.
        expect(reader.lookupSliceBinding(SHARD, 0, 480)?.entry.key).toBe(b.key);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(3))?.entry.key).toBe(b.key);
        expect(reader.holdsSeveralBindings).toBe(true);
        if (reader !== store) await reader.close();
      }
      // A stamp is one object's bytes: recorded with the latest binding, it leaves the older one, which binds nothing without a stamp.
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      expect(keysOf(store)).toEqual([b.key]);
      expect(store.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(b.key);
    } finally {
      await store.close();
    }
  });

  it('format gate: the objects of a second binding read as one binding under format 1, as two under format 2; format 3 is refused at open', async () => {
    const { prefix, url, store, revs } = await makeCache(2);
    const [a, b] = revs as [TestTensor, TestTensor];
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      // What a binding beside a's leaves in the bucket (b's stamp object, then its alias one epoch above), written by hand.
      const slice = [SHARD, 0, 480] as const;
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${stampObjectName(slice, b.key, etag(2), prefix)}`, Body: new Uint8Array(0) }));
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${sliceObjectName(slice, 1, b.key)}`, Body: new Uint8Array(0) }));
      const before = await openCacheStore(url);
      expect(keysOf(before)).toEqual([b.key]); // format 1: a was rebound away, as today
      await before.close();
      const header = (format: number): string => JSON.stringify({ layout: 's3-objects', format, chunk_size: store.chunkSize, coverage_min: store.coverageMin });
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}cache.json`, Body: header(2) }));
      const after = await openCacheStore(url);
      expect(keysOf(after)).toEqual([b.key, a.key]);
      expect(after.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(a.key);
      await after.close();
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}cache.json`, Body: header(3) }));
      const refused = await catchError(() => openCacheStore(url));
      expect(refused).toMatchObject({ code: 'UNSUPPORTED_FORMAT' });
      expect(refused.message).toContain('format 3 is not s3-objects 1 or 2');
    } finally {
      await store.close();
    }
  });

  it('addEntries binds a new entry\'s object-stamped slice beside, its other slices as before; past the limit droppedBindings names the oldest', async () => {
    const prefix = `f${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const revs = Array.from({ length: MAX_SLICE_BINDINGS + 1 }, (_, i) => makeTensor([40, 6], 800 + i));
    const store = await openCacheStore(url, { create: true, sliceBindingsPerFile: true });
    try {
      const [first] = await store.addEntries([toInput(revs[0]!, 'w', [[SHARD, 0, 480, [etag(0)]]])]);
      expect(first).toEqual({ key: revs[0]!.key, added: true, slicesBound: 1 });
      for (let i = 1; i < MAX_SLICE_BINDINGS; i++) {
        const [result] = await store.addEntries([toInput(revs[i]!, 'w', [[SHARD, 0, 480, [etag(i)]], [`other-${i}.safetensors`, 0, 480]])]);
        expect(result).toEqual({ key: revs[i]!.key, added: true, slicesBound: 2 });
      }
      expect(await layoutFormat(prefix)).toBe(2);
      expect(keysOf(store)).toEqual(revs.slice(0, MAX_SLICE_BINDINGS).map((t) => t.key).reverse());
      expect(store.lookupSliceBinding('other-3.safetensors', 0, 480)?.entry.key).toBe(revs[3]!.key);
      const [last] = await store.addEntries([toInput(revs[MAX_SLICE_BINDINGS]!, 'w', [[SHARD, 0, 480, [etag(MAX_SLICE_BINDINGS)]]])]);
      expect(last).toEqual({ key: revs[MAX_SLICE_BINDINGS]!.key, added: true, slicesBound: 1, droppedBindings: [{ slice: [SHARD, 0, 480], key: revs[0]!.key }] });
      const reader = await openCacheStore(url);
      for (let i = 1; i <= MAX_SLICE_BINDINGS; i++) expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(i))?.entry.key).toBe(revs[i]!.key);
      await reader.close();
      // Without an object stamp: SLICE_CONFLICT, as with one binding.
      const plain = makeTensor([40, 6], 899);
      expect((await catchError(() => store.addEntries([toInput(plain, 'w', [[SHARD, 0, 480]])]))).code).toBe('SLICE_CONFLICT');
    } finally {
      await store.close();
    }
  });

  it('besideOnlyIfSeveral: not applied while cache.json is format 1 (false, onBesideRefused); applied once another handle moved it', async () => {
    const { prefix, url, store, revs } = await makeCache(4);
    const [a, b, c, d] = revs as [TestTensor, TestTensor, TestTensor, TestTensor];
    const loader = await openCacheStore(url, { sliceBindingsPerFile: true });
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      await loader.refresh();
      const refused: [unknown, string][] = [];
      const onBesideRefused = (slice: unknown, key: string): void => void refused.push([slice, key]);
      expect(await loader.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2), besideOnlyIfSeveral: true }], { onBesideRefused })).toEqual([false]);
      expect(refused).toEqual([[[SHARD, 0, 480], b.key]]);
      expect(await layoutFormat(prefix)).toBe(1);
      expect(keysOf(loader)).toEqual([a.key]);
      // Another handle moves the cache (a build); the loader's view is still format 1, and it reads cache.json again.
      expect(await store.aliasSlices([{ key: c.key, ...SLICE, stamp: etag(3) }])).toEqual([true]);
      expect(await loader.aliasSlices([{ key: d.key, ...SLICE, stamp: etag(4), besideOnlyIfSeveral: true }], { onBesideRefused })).toEqual([true]);
      expect(refused).toHaveLength(1);
      expect(keysOf(loader)).toEqual([d.key, c.key, a.key]);
    } finally {
      await loader.close();
      await store.close();
    }
  });

  it('a handle without the option and a file stamp keep one binding: SLICE_CONFLICT, cache.json stays format 1', async () => {
    const { prefix, url, store, revs } = await makeCache(2);
    const [a, b] = revs as [TestTensor, TestTensor];
    const plain = await openCacheStore(url);
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      expect((await catchError(() => plain.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }]))).code).toBe('SLICE_CONFLICT');
      expect((await catchError(() => store.aliasSlices([{ key: b.key, ...SLICE, stamp: '9000:1733400000000000011:1733400000000000011:101' }]))).code).toBe('SLICE_CONFLICT');
      expect(await layoutFormat(prefix)).toBe(1);
      // Then a handle with the option binds beside, and the plain handle reads both once it refreshes.
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      await plain.refresh();
      expect(keysOf(plain)).toEqual([b.key, a.key]);
      expect(plain.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(a.key);
    } finally {
      await plain.close();
      await store.close();
    }
  });

  it(`past MAX_SLICE_BINDINGS (${MAX_SLICE_BINDINGS}) the oldest binding goes: reported, its alias and stamp objects deleted`, async () => {
    const { prefix, store, revs } = await makeCache(MAX_SLICE_BINDINGS + 1);
    try {
      for (let i = 0; i < MAX_SLICE_BINDINGS; i++) expect(await store.aliasSlices([{ key: revs[i]!.key, ...SLICE, stamp: etag(i) }])).toEqual([true]);
      expect(keysOf(store)).toHaveLength(MAX_SLICE_BINDINGS);
      const dropped: [unknown, string][] = [];
      const last = revs[MAX_SLICE_BINDINGS]!;
      expect(await store.aliasSlices([{ key: last.key, ...SLICE, stamp: etag(MAX_SLICE_BINDINGS) }], { onBindingDropped: (slice, key) => dropped.push([slice, key]) })).toEqual([true]);
      expect(dropped).toEqual([[[SHARD, 0, 480], revs[0]!.key]]);
      expect(keysOf(store)).toEqual(revs.slice(1).map((t) => t.key).reverse());
      expect(store.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(revs[1]!.key);
      expect(store.lookupSliceBinding(SHARD, 0, 480, etag(0))?.entry.key).toBe(last.key);
      expect((await listNames(`${prefix}slices/`)).filter((name) => name.endsWith(revs[0]!.key))).toEqual([]);
      expect((await listNames(`${prefix}stamps/`)).filter((name) => name.includes(`/${revs[0]!.key}.`))).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('unbindSlices with a key removes that binding only (a file binding, then the latest); without, every one', async () => {
    const { url, store, revs } = await makeCache(4);
    const [a, b, c, d] = revs as [TestTensor, TestTensor, TestTensor, TestTensor];
    try {
      for (const [i, t] of [a, b, c, d].entries()) expect(await store.aliasSlices([{ key: t.key, ...SLICE, stamp: etag(i) }])).toEqual([true]);
      expect(await store.unbindSlices([{ ...SLICE, key: b.key }])).toBe(1);
      expect(keysOf(store)).toEqual([d.key, c.key, a.key]);
      expect(await store.unbindSlices([{ ...SLICE, key: d.key }])).toBe(1);
      expect(keysOf(store)).toEqual([c.key, a.key]);
      const reader = await openCacheStore(url);
      expect(keysOf(reader)).toEqual([c.key, a.key]);
      expect(reader.lookupSliceBinding(SHARD, 0, 480)?.entry.key).toBe(c.key);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(0))?.entry.key).toBe(a.key);
      await reader.close();
      expect(await store.unbindSlices([{ ...SLICE }])).toBe(2);
      expect(keysOf(store)).toEqual([]);
      expect(store.getEntry(a.key)).toBeDefined();
    } finally {
      await store.close();
    }
  });

  it('gc keeps the stamps of bindings below the top epoch, and the drop their entries', async () => {
    const { url, store, revs } = await makeCache(3);
    const [a, b, unbound] = revs as [TestTensor, TestTensor, TestTensor];
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      const gc = await gcBelowFloorForTests(store);
      expect(gc.orphanStamps).toEqual([]);
      const drop = await dropBelowFloorForTests(store);
      expect(drop.entries.map((e) => e.key)).toEqual([unbound.key]);
      const reader = await openCacheStore(url);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))).toMatchObject({ entry: { key: a.key }, stamps: [etag(1)] });
      expect(reader.getEntry(a.key)).toBeDefined();
      await reader.close();
    } finally {
      await store.close();
    }
  });

  it('two writers adding beside at once (both aliases at one epoch before either looks): both bound, no stamp ever read with another key', async () => {
    const { url, store, revs } = await makeCache(3);
    const [a, b, c] = revs as [TestTensor, TestTensor, TestTensor];
    const other = await openCacheStore(url, { sliceBindingsPerFile: true });
    const seen: string[] = [];
    // Whatever a reader sees at that moment (both at the top epoch: a conflict), a stamp is read only with its own key.
    const look = async (): Promise<void> => {
      const reader = await openCacheStore(url);
      for (const [n, t] of [[1, a], [2, b], [3, c]] as const) {
        const binding = reader.lookupSliceBinding(SHARD, 0, 480, etag(n));
        if (binding?.stamps.includes(etag(n))) expect(binding.entry.key).toBe(t.key);
        seen.push(`${n}:${binding?.entry.key === t.key && binding.stamps.includes(etag(n))}`);
      }
      await reader.close();
    };
    const meet = barrier(2);
    const looked = deferred();
    let first = true;
    // Both alias PUTs land, then a reader looks, then both writers list (and settle the race).
    const afterPut = async (): Promise<void> => {
      await meet();
      if (first) {
        first = false;
        await look().finally(looked.resolve);
      }
      await looked.promise;
    };
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      holdAliasPut(store, { after: afterPut });
      holdAliasPut(other, { after: afterPut });
      await other.refresh();
      const [fromStore, fromOther] = await Promise.all([
        store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }]),
        other.aliasSlices([{ key: c.key, ...SLICE, stamp: etag(3) }]),
      ]);
      expect([fromStore, fromOther]).toEqual([[true], [true]]);
      // Mid-race the slice's top epoch held both new keys: a's binding was found by its stamp, theirs by none.
      expect(seen).toEqual(['1:true', '2:false', '3:false']);
      const reader = await openCacheStore(url);
      expect(new Set(keysOf(reader))).toEqual(new Set([a.key, b.key, c.key]));
      for (const [n, t] of [[1, a], [2, b], [3, c]] as const) {
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(n))).toMatchObject({ entry: { key: t.key }, stamps: [etag(n)] });
      }
      await reader.close();
    } finally {
      await other.close();
      await store.close();
    }
  });
});
