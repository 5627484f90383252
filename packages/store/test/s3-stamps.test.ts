// Object stamps (etag:<ETag>) of S3 caches: the stamps/ naming, and against the gateway how they
// are recorded, loaded, capped, hidden by a rebind, collected by gc and reported by verify.
import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { MAX_SLICE_STAMPS, MAX_SLICE_STAMP_CHARS, openCacheStore, type CacheStore } from '../src/index.js';
import {
  MAX_S3_PREFIX_BYTES,
  MAX_S3_SHARD_NAME_BYTES,
  MAX_S3_STAMP_BYTES,
  S3_MAX_OBJECT_KEY_BYTES,
  parseSliceObjectName,
  parseStampObjectName,
  stampDirName,
  stampObjectName,
} from '../src/s3-layout.js';
import { catchError, makeTensor, toInput } from './helpers.js';
import { describeS3, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const KEY_A = 'a'.repeat(40);
const etag = (n: number, parts?: number): string => `etag:"${n.toString(16).padStart(32, '0')}${parts === undefined ? '' : `-${parts}`}"`;
const FILE_STAMP = '80:1733400000123456789';

describe('stamp object names', () => {
  const slice = ['model-00001-of-00002.safetensors', 4096, 80] as const;

  it('round-trip: stamps/<base64url shard>/<offset>-<size>/<key>.<base64url stamp>', () => {
    const stamp = etag(1);
    const name = stampObjectName(slice, KEY_A, stamp, 'cache/');
    expect(name).toBe(`stamps/${Buffer.from(slice[0]).toString('base64url')}/4096-80/${KEY_A}.${Buffer.from(stamp).toString('base64url')}`);
    expect(name.startsWith(stampDirName(slice))).toBe(true);
    expect(parseStampObjectName(name)).toEqual({ slice: [...slice], key: KEY_A, stamp });
    // A multibyte shard name and a 0-offset slice.
    const other = ['分片 ü.safetensors', 0, 2] as const;
    expect(parseStampObjectName(stampObjectName(other, KEY_A, etag(2, 17), ''))).toEqual({ slice: [...other], key: KEY_A, stamp: etag(2, 17) });
    // Not an alias object, and alias objects are not stamp objects.
    expect(parseSliceObjectName(name)).toBeUndefined();
    expect(parseStampObjectName(`slices/${Buffer.from(slice[0]).toString('base64url')}/4096-80/0000000000.${KEY_A}`)).toBeUndefined();
  });

  it('refuses names this package did not write: non-canonical base64url, file stamps, bad keys, offsets, empty or oversized stamps', () => {
    const dir = stampDirName(slice);
    const good = stampObjectName(slice, KEY_A, etag(1), '');
    const stampPart = good.slice(good.lastIndexOf('.') + 1);
    const b64 = (text: string) => Buffer.from(text).toString('base64url');
    const bad = [
      `${dir}${KEY_A}.${b64(FILE_STAMP)}`, // a file stamp: never written to S3
      `${dir}${KEY_A}.${stampPart}=`, // padding
      `${dir}${KEY_A}.${b64('etag:"x"').slice(0, -1)}Z`, // non-canonical trailing bits
      `${dir}${KEY_A}.${b64(`etag:${'x'.repeat(MAX_SLICE_STAMP_CHARS)}`)}`, // above MAX_SLICE_STAMP_CHARS
      `${dir}${KEY_A}.${b64('etag:"a\0b"')}`, // NUL
      `${dir}${KEY_A}.${Buffer.from([0x65, 0x74, 0x61, 0x67, 0x3a, 0xff]).toString('base64url')}`, // not UTF-8
      `${dir}${KEY_A}.`, // no stamp
      `${dir}${'A'.repeat(40)}.${stampPart}`, // upper-case key
      `${dir}${KEY_A.slice(1)}.${stampPart}`, // short key
      `stamps/${b64(slice[0])}/04096-80/${KEY_A}.${stampPart}`, // leading zero
      `stamps/${b64(slice[0])}/99999999999999999-80/${KEY_A}.${stampPart}`, // offset too large
      `stamps/${b64(slice[0])}=/4096-80/${KEY_A}.${stampPart}`, // padded shard
      `stamps//4096-80/${KEY_A}.${stampPart}`, // empty shard
      `${good}/extra`,
      `x${good}`,
    ];
    for (const name of bad) expect([name, parseStampObjectName(name)]).toEqual([name, undefined]);
  });

  it('MAX_S3_STAMP_BYTES always fits; a longer stamp fits where the key leaves room, else INVALID_ARGUMENT', () => {
    expect(MAX_S3_STAMP_BYTES).toBe(43);
    // The longest prefix, shard name and offsets with a stamp of MAX_S3_STAMP_BYTES: exactly within the limit or under.
    const longest = ['x'.repeat(MAX_S3_SHARD_NAME_BYTES), Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER] as const;
    const prefix = `${'p'.repeat(MAX_S3_PREFIX_BYTES - 1)}/`;
    const stamp = `etag:${'e'.repeat(MAX_S3_STAMP_BYTES - 5)}`;
    const name = stampObjectName(longest, KEY_A, stamp, prefix);
    expect(Buffer.byteLength(prefix + name)).toBeLessThanOrEqual(S3_MAX_OBJECT_KEY_BYTES);
    expect(parseStampObjectName(name)?.stamp).toBe(stamp);
    const error = (() => {
      try {
        stampObjectName(longest, KEY_A, etag(1, 10000), prefix); // 45 bytes
      } catch (e) {
        return e as { code?: string; details?: Record<string, unknown> };
      }
      return undefined;
    })();
    expect(error?.code).toBe('INVALID_ARGUMENT');
    expect(error?.details?.limit).toBe(S3_MAX_OBJECT_KEY_BYTES);
    // The same stamp with an ordinary shard name and prefix fits.
    expect(parseStampObjectName(stampObjectName(slice, KEY_A, etag(1, 10000), 'models/'))?.stamp).toBe(etag(1, 10000));
  });
});

describeS3('S3 object stamps against the gateway', () => {
  const bucket = uniqueBucket('stamps');
  const client = rawClient();
  let run = 0;
  const url = (prefix: string) => `s3://${bucket}/${prefix}`;
  const nextPrefix = () => `t${run++}/`;
  const SHARD = 'model-00001-of-00001.safetensors';

  useTestBucket(client, bucket);

  async function listNames(prefix: string, below: string): Promise<string[]> {
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}${below}` }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
  }
  const stampsOf = (store: CacheStore, offset = 0, size = 80) => store.lookupSliceBinding(SHARD, offset, size)?.stamps;

  it('an object stamp is recorded with the binding, seen by this instance and another; file stamps write no object', async () => {
    const prefix = nextPrefix();
    const a = makeTensor([40], 1);
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntry(toInput(a, 'a'));
    // A new binding with an object stamp: alias and stamp written.
    expect(await store.aliasSlice(a.key, SHARD, 0, 80, etag(1))).toBe(true);
    expect(stampsOf(store)).toEqual([etag(1)]);
    expect(store.getEntry(a.key)?.sliceKeys).toEqual([[SHARD, 0, 80, [etag(1)]]]);
    // Bound already: only the stamp object is new (no second alias object).
    const aliasesBefore = await listNames(prefix, 'slices/');
    expect(await store.aliasSlices([{ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: etag(2) }])).toEqual([true]);
    expect(await listNames(prefix, 'slices/')).toEqual(aliasesBefore);
    expect([...stampsOf(store)!].sort()).toEqual([etag(1), etag(2)]);
    // A file stamp describes one host's file: nothing written to the bucket for it (this instance
    // keeps it as a host stamp: s3-host-stamps.test.ts).
    const stampObjects = await listNames(prefix, 'stamps/');
    expect(stampObjects).toHaveLength(2);
    expect(await store.aliasSlice(a.key, SHARD, 0, 80, FILE_STAMP)).toBe(true);
    expect(await store.aliasSlice(a.key, SHARD, 160, 80, FILE_STAMP)).toBe(true);
    expect(await listNames(prefix, 'stamps/')).toEqual(stampObjects);
    expect(stampsOf(store, 160)).toEqual([FILE_STAMP]);
    // An invalid stamp is refused as on a local cache; nothing written.
    expect((await catchError(() => store.aliasSlice(a.key, SHARD, 320, 80, ''))).code).toBe('INVALID_ARGUMENT');
    expect(store.lookupBySlice(SHARD, 320, 80)).toBeUndefined();
    // So are items that are holes or not objects, the good one beside them not written either.
    const good = { key: a.key, shardName: SHARD, offsetBytes: 320, sizeBytes: 80 };
    for (const items of [new Array(1), [good, null], [good, 'x']]) {
      expect((await catchError(() => store.aliasSlices(items as never))).message).toMatch(/INVALID_ARGUMENT: aliasSlices item \d must be/);
    }
    expect((await catchError(() => store.addEntries(new Array(1)))).message).toMatch(/INVALID_ARGUMENT: addEntries item 0 must be/);
    expect(store.lookupBySlice(SHARD, 320, 80)).toBeUndefined();
    // A second instance loads them from the listing.
    const other = await openCacheStore(url(prefix));
    expect([...stampsOf(other)!].sort()).toEqual([etag(1), etag(2)]);
    expect(stampsOf(other, 160)).toEqual([]);
    expect((await other.verify()).problems).toEqual([]);
    // Recording a stamp other already shows writes nothing new.
    expect(await other.aliasSlice(a.key, SHARD, 0, 80, etag(2))).toBe(true);
    expect(await listNames(prefix, 'stamps/')).toEqual(stampObjects);
    await Promise.all([store.close(), other.close()]);
  });

  it('addEntries records object stamps of its slice keys (new entry, and a re-add binding or restamping its slices); file stamps write no object', async () => {
    const prefix = nextPrefix();
    const [a, b] = [makeTensor([40], 3), makeTensor([40], 4)];
    const store = await openCacheStore(url(prefix), { create: true });
    const [added] = await store.addEntries([toInput(a, 'a', [[SHARD, 0, 80, [FILE_STAMP, etag(1)]]])]);
    expect(added).toEqual({ key: a.key, added: true, slicesBound: 1 });
    expect(stampsOf(store)).toEqual([etag(1), FILE_STAMP]); // the bucket's, then this host's (in memory: no readThroughDir)
    // A re-add of the existing key: a new stamp for the bound slice, and a new slice with its stamp.
    const [again] = await store.addEntries([toInput(a, 'a', [[SHARD, 0, 80, [etag(2)]], [SHARD, 800, 80, [etag(3), FILE_STAMP]]])]);
    expect(again).toEqual({ key: a.key, added: false, slicesBound: 1 });
    expect([...stampsOf(store)!].sort()).toEqual([FILE_STAMP, etag(1), etag(2)]);
    expect(stampsOf(store, 800)).toEqual([etag(3), FILE_STAMP]);
    expect(await listNames(prefix, 'stamps/')).toHaveLength(3); // no object for a file stamp
    // leaveTakenSlices: a slice bound to another key is left out, and so is its stamp.
    const [left] = await store.addEntries([{ ...toInput(b, 'b', [[SHARD, 0, 80, [etag(9)]]]), leaveTakenSlices: true }]);
    expect(left).toEqual({ key: b.key, added: true, slicesBound: 0 });
    expect((await listNames(prefix, 'stamps/')).some((n) => n.includes(b.key))).toBe(false);
    const other = await openCacheStore(url(prefix));
    expect([...stampsOf(other)!].sort()).toEqual([etag(1), etag(2)]);
    expect(stampsOf(other, 800)).toEqual([etag(3)]);
    await Promise.all([store.close(), other.close()]);
  });

  it('a rebind to another key hides the old key\'s stamps; gc removes stamp objects of gone bindings and keeps live ones', async () => {
    const prefix = nextPrefix();
    const [a, b] = [makeTensor([40], 5), makeTensor([40], 6)];
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntries([toInput(a, 'a', [[SHARD, 0, 80, [etag(1)]]]), toInput(b, 'b', [[SHARD, 80, 80, [etag(5)]]])]);
    expect(stampsOf(store)).toEqual([etag(1)]);
    expect(await store.aliasSlices([{ key: b.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80 }], { rebind: true })).toEqual([true]);
    expect(store.lookupBySlice(SHARD, 0, 80)?.key).toBe(b.key);
    expect(stampsOf(store)).toEqual([]);
    const other = await openCacheStore(url(prefix));
    expect(stampsOf(other)).toEqual([]);
    // Rebound with a stamp: the new key's.
    expect(await store.aliasSlices([{ key: b.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: etag(2) }])).toEqual([true]);
    expect(stampsOf(store)).toEqual([etag(2)]);

    // Orphans: a's stamp of the rebound slice; a stamp object of a key without an entry object; a
    // stamp of a slice never bound. Live: b's stamps of both slices.
    const orphanA = stampObjectName([SHARD, 0, 80], a.key, etag(1), prefix);
    const noEntry = stampObjectName([SHARD, 80, 80], 'c'.repeat(40), etag(7), prefix);
    const unbound = stampObjectName([SHARD, 4000, 80], a.key, etag(8), prefix);
    for (const name of [noEntry, unbound]) await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${name}`, Body: new Uint8Array(0) }));
    const live = [stampObjectName([SHARD, 0, 80], b.key, etag(2), prefix), stampObjectName([SHARD, 80, 80], b.key, etag(5), prefix)];
    expect(await listNames(prefix, 'stamps/')).toEqual([orphanA, noEntry, unbound, ...live].sort());

    const young = await store.gc();
    expect(young.orphanStamps).toEqual([]);
    expect(young.unknownFiles).toEqual([]);
    const dry = await gcBelowFloorForTests(store, { dryRun: true });
    expect([...dry.orphanStamps!].sort()).toEqual([orphanA, noEntry, unbound].sort());
    expect(dry.unknownFiles).toEqual([]);
    expect(await listNames(prefix, 'stamps/')).toHaveLength(5);
    const done = await gcBelowFloorForTests(store);
    expect([...done.orphanStamps!].sort()).toEqual(dry.orphanStamps!.sort());
    expect(await listNames(prefix, 'stamps/')).toEqual([...live].sort());
    expect((await gcBelowFloorForTests(store)).orphanStamps).toEqual([]);
    await store.refresh();
    expect(stampsOf(store)).toEqual([etag(2)]);
    expect(stampsOf(store, 80)).toEqual([etag(5)]);
    expect((await store.verify()).ok).toBe(true);

    // An entry object removed by hand: its stamps go with the binding.
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}entries/${b.key}.${store.getEntry(b.key)!.blobSha256}.json` }));
    expect([...(await gcBelowFloorForTests(store)).orphanStamps!].sort()).toEqual([...live].sort());
    expect(await listNames(prefix, 'stamps/')).toEqual([]);
    await Promise.all([store.close(), other.close()]);
  });

  it('keeps the latest MAX_SLICE_STAMPS stamps of a binding, oldest first', async () => {
    const prefix = nextPrefix();
    const a = makeTensor([40], 7);
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntry(toInput(a, 'a', [[SHARD, 0, 80]]));
    const first = Array.from({ length: 10 }, (_, i) => etag(100 + i));
    const second = Array.from({ length: MAX_SLICE_STAMPS - 8 }, (_, i) => etag(200 + i));
    await store.aliasSlices(first.map((stamp) => ({ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp })));
    expect(stampsOf(store)).toHaveLength(10);
    await sleep(1100); // S3 times may have a second's resolution: the second batch is newer
    await store.aliasSlices(second.map((stamp) => ({ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp })));
    // The order the store must give: by LastModified, then name (base64url names do not sort as the stamps do).
    const listed = ((await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}stamps/` }))).Contents ?? [])
      .map((o) => ({ time: o.LastModified!.getTime(), name: o.Key!, stamp: parseStampObjectName(o.Key!.slice(prefix.length))!.stamp }))
      .sort((x, y) => x.time - y.time || (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
    expect(listed).toHaveLength(18);
    const expected = listed.slice(-MAX_SLICE_STAMPS).map((o) => o.stamp);
    expect(stampsOf(store)).toEqual(expected);
    // Two of the first batch went, the second batch is the newest.
    expect(expected.slice(-second.length).sort()).toEqual([...second].sort());
    const dropped = first.filter((stamp) => !expected.includes(stamp));
    expect(dropped).toHaveLength(2);
    const other = await openCacheStore(url(prefix));
    expect(stampsOf(other)).toEqual(expected);
    // A dropped stamp recorded again is the newest (its object written again).
    await sleep(1100);
    expect(await other.aliasSlice(a.key, SHARD, 0, 80, dropped[0]!)).toBe(true);
    expect(stampsOf(other)).toEqual([...expected.slice(1), dropped[0]]);
    // gc removes the stamp objects beyond the newest MAX_SLICE_STAMPS (no reader takes them again),
    // none younger than minAgeMs, and what readers see does not change.
    expect((await other.gc()).orphanStamps).toEqual([]);
    const shown = stampsOf(other);
    const superseded = (await listNames(prefix, 'stamps/')).filter((name) => !shown!.includes(parseStampObjectName(name)!.stamp));
    expect(superseded).toHaveLength(2);
    expect([...(await gcBelowFloorForTests(other)).orphanStamps!].sort()).toEqual([...superseded].sort());
    expect(await listNames(prefix, 'stamps/')).toHaveLength(MAX_SLICE_STAMPS);
    const after = await openCacheStore(url(prefix));
    expect(stampsOf(after)).toEqual(shown);
    // A superseded stamp written again after gc listed it (a reader checked that version again: it
    // is the newest now) is kept, however old its new write is by the time gc gets to it.
    await after.aliasSlices([etag(300), etag(301)].map((stamp) => ({ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp })));
    const oldest = stampsOf(after)!.length === MAX_SLICE_STAMPS ? shown![0]! : '';
    expect(stampsOf(after)).not.toContain(oldest);
    const transport = (after as unknown as { transport: { list(prefix: string): Promise<unknown[]> } }).transport;
    const list = transport.list.bind(transport);
    transport.list = async (below: string) => {
      const listed = await list(below);
      if (below === '') {
        await sleep(1100); // a second later: S3 times have a second's resolution
        expect(await other.aliasSlice(a.key, SHARD, 0, 80, oldest)).toBe(true);
      }
      return listed;
    };
    const raced = await gcBelowFloorForTests(after);
    expect(raced.orphanStamps).not.toContain(stampObjectName([SHARD, 0, 80], a.key, oldest, ''));
    const last = await openCacheStore(url(prefix));
    expect(stampsOf(last)!.at(-1)).toBe(oldest);
    await Promise.all([store.close(), other.close(), after.close(), last.close()]);
  });

  it('an unrecognised object below stamps/ is reported by verify, never attached to a binding; gc leaves it as unknown', async () => {
    const prefix = nextPrefix();
    const a = makeTensor([40], 8);
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntry(toInput(a, 'a', [[SHARD, 0, 80, [etag(1)]]]));
    const dir = stampDirName([SHARD, 0, 80]);
    const strays = [`${dir}${a.key}.${Buffer.from(FILE_STAMP).toString('base64url')}`, `${dir}${a.key}.${Buffer.from(etag(2)).toString('base64url')}=`, 'stamps/notes.txt'];
    for (const name of strays) await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${name}`, Body: new Uint8Array(0) }));
    await store.refresh();
    expect(stampsOf(store)).toEqual([etag(1)]);
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.problems.map((p) => p.code)).toEqual(strays.map(() => 'ENTRY_INVALID'));
    for (const name of strays) expect(report.problems.some((p) => p.message.includes(name) && p.message.includes('below stamps/'))).toBe(true);
    const gc = await gcBelowFloorForTests(store);
    expect([...gc.unknownFiles].sort()).toEqual([...strays].sort());
    expect(gc.orphanStamps).toEqual([]);
    await store.close();
  });

  it('a stamp whose object key would pass 1024 bytes is INVALID_ARGUMENT before anything is written', async () => {
    const prefix = `${'p'.repeat(150)}/`;
    const a = makeTensor([40], 9);
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntry(toInput(a, 'a'));
    const shard = 's'.repeat(MAX_S3_SHARD_NAME_BYTES);
    const stamp = `etag:"${'f'.repeat(100)}"`;
    const error = await catchError(() => store.aliasSlice(a.key, shard, 0, 80, stamp));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(store.lookupBySlice(shard, 0, 80)).toBeUndefined();
    expect((await catchError(() => store.addEntries([toInput(a, 'a', [[shard, 0, 80, [stamp]]])]))).code).toBe('INVALID_ARGUMENT');
    expect(await listNames(prefix, 'slices/')).toEqual([]);
    // A stamp within MAX_S3_STAMP_BYTES fits there.
    expect(await store.aliasSlice(a.key, shard, 0, 80, etag(1))).toBe(true);
    expect(store.lookupSliceBinding(shard, 0, 80)?.stamps).toEqual([etag(1)]);
    await store.close();
  });
});
