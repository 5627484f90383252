// gc's re-checks before deleting stamps, shadowed aliases and orphan blobs on an s3:// cache, and the
// drop's judged_at_ms (README "S3 layout", Removing entries, step 9; review R1b's L1, L2, L5).
import { expect, it } from 'vitest';
import { CLOCK_OFFSET_NOISE_MS, type CacheStore, type GcReport } from '../src/index.js';
import { decodeDropIntent } from '../src/s3-drop-intents.js';
import { sliceObjectName } from '../src/s3-layout.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { SHARD, blobName, entryName, transportOf, useDropBucket } from './s3-drop-fixtures.js';
import { describeS3, dropBelowFloorForTests, gcBelowFloorForTests } from './s3-helpers.js';

describeS3('S3 store: gc re-checks entry, intents, entry; what gc counts; the drop judged_at_ms', () => {
  const fx = useDropBucket('gcrecheck');

  /**
   * gc of `store` with `t`'s entry object deleted, while a drop puts that entry back and removes its
   * intent during gc's look at the key's intents (after its first look at the entry).
   */
  async function gcWhileDropPutsBack(store: CacheStore, prefix: string, t: TestTensor): Promise<GcReport> {
    const bytes = await fx.getRaw(`${prefix}${entryName(t)}`);
    await fx.deleteRaw(`${prefix}${entryName(t)}`);
    const transport = transportOf(store);
    const list = transport.list.bind(transport);
    let done = false;
    transport.list = async (dir) => {
      const listed = await list(dir);
      if (dir === `dropping/${t.key}.` && !done) {
        done = true;
        await fx.putRaw(`${prefix}${entryName(t)}`, bytes);
      }
      return listed;
    };
    return gcBelowFloorForTests(store);
  }

  it("gc keeps a stamp whose key's entry a drop put back between gc's entry and intent looks (it looks at the entry again)", async () => {
    const b = makeTensor([40000, 1], 2101);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b });
    const stamp = await fx.bindWithStamp(prefix, b);
    const report = await gcWhileDropPutsBack(store, prefix, b);
    expect(report.orphanStamps).toEqual([]);
    expect(await fx.listNames(prefix, stamp)).toEqual([stamp]);
    await store.close();
  });

  it("gc keeps a shadowed alias whose key's entry a drop put back between gc's entry and intent looks", async () => {
    const b = makeTensor([40000, 1], 2201);
    const c = makeTensor([40000, 1], 2202);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b, 'c.weight': c });
    const shadowed = sliceObjectName([SHARD, 0, 80000], 0, b.key);
    await fx.putRaw(`${prefix}${shadowed}`);
    await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 1, c.key)}`);
    const report = await gcWhileDropPutsBack(store, prefix, b);
    expect(report.orphanAliases).toEqual([]);
    expect(await fx.listNames(prefix, shadowed)).toEqual([shadowed]);
    await store.close();
  });

  it('an orphan blob found gone at gc\'s last look is not counted as deleted by gc (orphanBlobs, orphanBytes)', async () => {
    const b = makeTensor([40000, 1], 2301);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b });
    await fx.deleteRaw(`${prefix}${entryName(b)}`);
    const transport = transportOf(store);
    const head = transport.headObject.bind(transport);
    transport.headObject = async (name) => {
      // Another gc deletes the blob just before this one's last look.
      if (name === blobName(b)) await fx.deleteRaw(`${prefix}${blobName(b)}`);
      return head(name);
    };
    const report = await gcBelowFloorForTests(store);
    expect(report.orphanBlobs).toEqual([]);
    expect(report.orphanBytes).toBe(0);
    await store.close();
  });

  it("the drop's intent judged_at_ms is its judging listing's start less 1 s and CLOCK_OFFSET_NOISE_MS", async () => {
    const b = makeTensor([40000, 1], 2401);
    const { store } = await fx.storeHolding({ 'b.weight': b });
    const listingNowMs = 1_900_000_000_000;
    (store as unknown as { listingNowMs(startedMs: number): number }).listingNowMs = () => listingNowMs;
    const transport = transportOf(store);
    const put = transport.putObject.bind(transport);
    const intents: Uint8Array[] = [];
    transport.putObject = async (name, body, contentType) => {
      if (name.startsWith('dropping/')) intents.push(body);
      return put(name, body, contentType);
    };
    await dropBelowFloorForTests(store);
    expect(intents).toHaveLength(1);
    expect(decodeDropIntent(intents[0]!)?.judgedAtMs).toBe(listingNowMs - 1000 - CLOCK_OFFSET_NOISE_MS);
    await store.close();
  });
});
