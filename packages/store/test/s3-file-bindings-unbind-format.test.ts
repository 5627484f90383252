// unbindSlices on s3:// reads the format (cache.json) AFTER each slice's listing, and refuses where
// it cannot read it (FILE-BINDINGS.md, "Phase 2: s3://"). A format-1 handle that took an unreadable
// cache.json for format 1 removed a format-2 slice's latest binding by the one-binding rule: every
// alias below the top went, other files' bindings; and a move landing between an earlier look and
// the listing made a keyed unbind see another key at the top and answer 0, the binding left.
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { describeS3 } from './s3-helpers.js';
import { etag, keysOf, openWithRevisions, SHARD, SLICE, transportOf, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

/** Every later read of cache.json by this handle answers `reply` (undefined: as a 404 would). */
function answerHeader(store: CacheStore, reply: Uint8Array | undefined): void {
  const transport = transportOf(store);
  const get = transport.getSmallObject.bind(transport);
  transport.getSmallObject = (name, max) => (name === 'cache.json' ? Promise.resolve(reply) : get(name, max));
}

describeS3('S3 store: unbindSlices reads the format after its listing', () => {
  const { bucket } = useFileBindingsBucket('unbind-format');
  let run = 0;
  async function makeCache(): Promise<{ url: string; store: CacheStore; a: TestTensor; b: TestTensor }> {
    const url = `s3://${bucket}/u${run++}/`;
    const [a, b] = [0, 1].map((i) => makeTensor([40, 6], 800 + i + run * 20)) as [TestTensor, TestTensor];
    const store = await openWithRevisions(url, [a, b]);
    expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
    return { url, store, a, b };
  }

  for (const [label, reply, code] of [
    ['a 404', undefined, 'NOT_A_CACHE'],
    ['a garbled reply', new TextEncoder().encode('{"layout": "s3-obj'), 'MANIFEST_INVALID'],
  ] as const) {
    it(`cache.json unreadable (${label}) to a format-1 handle: the keyed unbind of the latest refuses, other files' bindings stay`, async () => {
      const { url, store, a, b } = await makeCache();
      const handle = await openCacheStore(url); // format 1 when it opened
      try {
        expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]); // the move: [b, a]
        answerHeader(handle, reply);
        await expect(handle.unbindSlices([{ ...SLICE, key: b.key }])).rejects.toMatchObject({ code, details: { caller: 'unbindSlices' } });
        const reader = await openCacheStore(url);
        expect(keysOf(reader)).toEqual([b.key, a.key]);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))).toMatchObject({ entry: { key: a.key }, stamps: [etag(1)] });
        await reader.close();
      } finally {
        await handle.close();
        await store.close();
      }
    });
  }

  it('a move to format 2 just before the slice is listed: the keyed unbind removes that binding (1), the new one stays', async () => {
    const { url, store, a, b } = await makeCache();
    const handle = await openCacheStore(url); // format 1, a the one binding
    try {
      const transport = transportOf(handle);
      const list = transport.list.bind(transport);
      let move: Promise<unknown> | undefined;
      transport.list = async (prefix: string) => {
        // The removal's own listing of the slice (slices/… and stamps/… of it), not a refresh's whole-prefix one.
        if (/^(slices|stamps)\/.+\/0-480\/$/.test(prefix)) {
          move ??= store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }]);
          await move;
        }
        return list(prefix);
      };
      expect(await handle.unbindSlices([{ ...SLICE, key: a.key }])).toBe(1);
      expect(move).toBeDefined(); // the hook ran: the move landed after the handle's own look
      expect(await move).toEqual([true]);
      const reader = await openCacheStore(url);
      expect(keysOf(reader)).toEqual([b.key]);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(2))).toMatchObject({ entry: { key: b.key }, stamps: [etag(2)] });
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))?.stamps).not.toContain(etag(1));
      await reader.close();
    } finally {
      await handle.close();
      await store.close();
    }
  });
});
