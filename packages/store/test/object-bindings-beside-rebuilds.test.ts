// Operations that rebuild the state from its entries (unbindSlices, dropUnboundEntries, a recovery
// leaving out a journal's damaged entry) on a format-4 cache (FILE-BINDINGS.md phase 3): the object
// bindings beside others that stay are kept at their level, never refused as SLICE_CONFLICT.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore, recoverDamagedManifest, type CacheStore } from '../src/index.js';
import { makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';
import { makeUnboundCache } from './unbound-cache.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
/** A second slice of the shard (the entries hold 480 raw bytes each). */
const SECOND_SLICE = { shardName: SHARD, offsetBytes: 480, sizeBytes: 480 };
const FIRST_SEED = 760;
/** Revision n's object stamp (an ETag of 32 hex digits). */
const etag = (n: number): string => `etag:"${n.toString(16).padStart(32, '0')}"`;

async function manifestFormat(root: string): Promise<number> {
  return (JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { format: number }).format;
}

function keysAt(store: CacheStore, slice: typeof SLICE): string[] {
  return store.lookupSliceBindings(slice.shardName, slice.offsetBytes, slice.sizeBytes).map((b) => b.entry.key).sort();
}

/** A cache whose slice holds three object revisions' bindings side by side (format 4), and an entry of its own bound nowhere. */
async function makeFormat4Cache(): Promise<{ root: string; tensors: TestTensor[] }> {
  const { root, tensors } = await makeUnboundCache(4, FIRST_SEED);
  const store = await openCacheStore(root, { sliceBindingsPerFile: true });
  for (const [i, tensor] of tensors.slice(0, 3).entries()) expect(await store.aliasSlices([{ key: tensor.key, ...SLICE, stamp: etag(i + 1) }])).toEqual([true]);
  await store.close();
  expect(await manifestFormat(root)).toBe(4);
  return { root, tensors };
}

describe('a rebuilt state keeps the object bindings beside others', () => {
  it('unbindSlices of one of three object bindings: the other two stay beside, format 4', async () => {
    const { root, tensors } = await makeFormat4Cache();
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    // Before: SLICE_CONFLICT (the state was rebuilt at the level of file bindings beside).
    expect(await store.unbindSlices([{ ...SLICE, key: tensors[2]!.key }])).toBe(1);
    expect(keysAt(store, SLICE)).toEqual([tensors[0]!.key, tensors[1]!.key].sort());
    expect(store.holdsObjectBindingsBeside).toBe(true);
    await store.close();
    expect(await manifestFormat(root)).toBe(4);
    const reopened = await openCacheStore(root);
    expect(keysAt(reopened, SLICE)).toEqual([tensors[0]!.key, tensors[1]!.key].sort());
    await reopened.close();
  });

  it('dropUnboundEntries: the unbound entry goes, the three object bindings stay', async () => {
    const { root, tensors } = await makeFormat4Cache();
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    const report = await store.dropUnboundEntries();
    expect(report.entries.map((entry) => entry.key)).toEqual([tensors[3]!.key]);
    expect(keysAt(store, SLICE)).toEqual(tensors.slice(0, 3).map((t) => t.key).sort());
    await store.close();
    expect(await manifestFormat(root)).toBe(4);
  });

  it('recoverDamagedManifest leaving out a journal entry whose blob is damaged: the journal\'s object bindings beside are kept', async () => {
    const { root, tensors } = await makeFormat4Cache();
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    // Into the version-3 journal: two object bindings beside at another slice, and a new entry.
    expect(await store.aliasSlices([{ key: tensors[0]!.key, ...SECOND_SLICE, stamp: etag(1) }])).toEqual([true]);
    expect(await store.aliasSlices([{ key: tensors[1]!.key, ...SECOND_SLICE, stamp: etag(2) }])).toEqual([true]);
    const late = makeTensor([40, 6], FIRST_SEED + 10);
    await store.addEntries([toInput(late, 'late.weight')]);
    await store.close();
    const blob = join(root, 'blobs', `${late.key}.bin`);
    const bytes = await readFile(blob);
    bytes[bytes.length - 1]! ^= 0x01;
    await writeFile(blob, bytes);
    // Damage in the unbound entry's name (what a recovery makes of that entry is not this test's).
    const text = await readFile(join(root, 'manifest.json'), 'utf8');
    const damaged = text.replace('"t3.weight"', '"t3.weighu"');
    expect(damaged).not.toBe(text);
    await writeFile(join(root, 'manifest.json'), damaged);
    // Before: SLICE_CONFLICT when the state was rebuilt without the damaged entry.
    const recovery = await recoverDamagedManifest(root);
    expect(recovery).toMatchObject({ droppedEntries: [late.key] });
    const recovered = await openCacheStore(root);
    expect(keysAt(recovered, SECOND_SLICE)).toEqual([tensors[0]!.key, tensors[1]!.key].sort());
    expect(recovered.getEntry(late.key)).toBeUndefined();
    await recovered.close();
  });
});
