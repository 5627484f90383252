import { readFile, readdir, rm, stat, writeFile, appendFile } from 'node:fs/promises';
import { join } from 'node:path';
import { decode, readPayloadMeta, xxh32 } from '@splitzip/codec';
import { writeSignedManifest } from '@splitzip/test-support/manifest';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SLICE_STAMP_CHARS, MAX_SLICE_STAMPS, openCacheStore, type AddEntryInput } from '../src/index.js';
import { scanJournalRecords, JOURNAL_HEADER_BYTES, encodeJournalRecords } from '../src/journal-format.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

async function journalRecords(root: string, generation: number) {
  const bytes = new Uint8Array(await readFile(join(root, `journal.${generation}`)));
  return scanJournalRecords(bytes.subarray(JOURNAL_HEADER_BYTES), JOURNAL_HEADER_BYTES, 'journal');
}

describe('openCacheStore', () => {
  it('creates the seed layout and reopens it', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, chunkSize: 2048, coverageMin: 0.95 });
    expect(store.size).toBe(0);
    expect(store.generation).toBe(1);
    await store.close();
    expect((await readdir(root)).sort()).toEqual(['blobs', 'journal.1', 'manifest.json']);
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8'));
    expect(manifest).toEqual({ format: 2, chunk_size: 2048, coverage_min: 0.95, entries: {}, generation: 1, body_crc32: expect.stringMatching(/^[0-9a-f]{8}$/) });
    const again = await openCacheStore(root);
    expect(again.chunkSize).toBe(2048);
    expect(again.coverageMin).toBe(0.95);
    await again.close();
  });

  it('refuses a directory without a manifest unless create is set', async () => {
    const root = await makeTempDir();
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.path).toBe(join(root, 'manifest.json'));
  });

  it('refuses a cache path that is a file, as NOT_A_CACHE (not an I/O error)', async () => {
    const file = join(await makeTempDir(), 'weights.bin');
    await writeFile(file, 'not a cache');
    const error = await catchError(() => openCacheStore(file));
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.message).toContain('not a directory');
    expect(error.path).toBe(file); // the path given (its manifest.json is no file at all)
  });

  it('refuses a mistyped object-store URL instead of making a local directory of that name', async () => {
    const cwd = process.cwd();
    const dir = await makeTempDir();
    process.chdir(dir);
    try {
      for (const url of ['S3://bucket/prefix', 's3:/bucket/prefix', 'gs://bucket/prefix', 'https://host/bucket']) {
        const error = await catchError(() => openCacheStore(url, { create: true }));
        expect(error.code, url).toBe('INVALID_ARGUMENT');
        expect(error.message).toMatch(/looks like a URL/);
      }
      expect(await readdir(dir)).toEqual([]);
    } finally {
      process.chdir(cwd);
    }
  });

  it('validates options', async () => {
    const root = await makeTempDir();
    for (const options of [{ chunkSize: 1000 }, { coverageMin: 1.5 }, { lockTimeoutMs: -1 }, { refreshIntervalMs: 0 }]) {
      expect((await catchError(() => openCacheStore(root, { create: true, ...options }))).code).toBe('INVALID_ARGUMENT');
    }
  });
});

describe('entries', () => {
  it('adds an entry, looks it up by content and reads back a verified payload that decodes exactly', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([33, 65], 1);
    expect(await store.addEntry(toInput(t, 'model.layers.0.mlp.up_proj'))).toEqual({ key: t.key, added: true, slicesBound: 0 });
    const entry = store.lookup(t.bytes, t.shape, 'BF16')!;
    expect(entry.key).toBe(t.key);
    expect(entry).toMatchObject({
      qualname: 'model.layers.0.mlp.up_proj',
      blob: `blobs/${t.key}.bin`,
      rawBytes: t.bytes.length,
      compBytes: t.payload.length,
      dtype: 'BF16',
      shape: [33, 65],
      formatVersion: 3,
      sha256: t.sha256,
      sliceKeys: [],
    });
    expect(entry.blobChecksum).toMatch(/^xxh32:[0-9a-f]{8}$/);
    expect(Object.isFrozen(entry)).toBe(true);
    expect(store.lookup(t.bytes, t.shape, 'F16')).toBeUndefined();
    expect(store.lookup(t.bytes, t.shape, 'torch.bfloat16')?.key).toBe(t.key);
    const slot = new Uint8Array(t.payload.length + 100);
    const view = await store.readBlob(t.key, slot);
    expect(view.buffer).toBe(slot.buffer);
    expect(Buffer.from(view).equals(Buffer.from(t.payload))).toBe(true);
    expect(Buffer.from(decode(view).buffer).equals(Buffer.from(t.bytes))).toBe(true);
    expect(await readFile(join(root, 'blobs', `${t.key}.bin`))).toEqual(Buffer.from(t.payload));
    await store.close();
  });

  it('says how many of its slice keys an add bound: all with a new entry, none for an existing key (the caller aliases them)', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([100], 3);
    const sliceKeys: [string, number, number][] = [
      ['s.safetensors', 0, 200],
      ['t.safetensors', 8, 200],
    ];
    expect(await store.addEntry({ ...toInput(t, 'a'), sliceKeys })).toEqual({ key: t.key, added: true, slicesBound: 2 });
    expect(await store.addEntry({ ...toInput(t, 'a'), sliceKeys: [['u.safetensors', 0, 200]] })).toEqual({ key: t.key, added: false, slicesBound: 0 });
    expect(store.lookupBySlice('u.safetensors', 0, 200)).toBeUndefined();
    await store.close();
  });

  it('two concurrent adds of one key with different payloads commit the winner with its own blob', async () => {
    // The same tensor encoded at two chunk sizes: one content key, two payloads. Grouped into one
    // commit, the entry came from one call and the blob from the other (BLOB_SIZE_MISMATCH on every read).
    for (const order of [0, 1]) {
      const root = await makeTempDir();
      const store = await openCacheStore(root, { create: true });
      const small = makeTensor([4096], 31, 64);
      const large = { ...small, payload: makeTensor([4096], 31, 1024).payload };
      expect(large.payload.length).not.toBe(small.payload.length);
      const [first, second] = order === 0 ? [small, large] : [large, small];
      const results = await Promise.all([store.addEntries([toInput(first, 'a')]), store.addEntries([toInput(second, 'b')])]);
      expect(results.flat().filter((r) => r.added)).toHaveLength(1);
      const entry = store.getEntry(small.key)!;
      const view = await store.readBlob(small.key, new Uint8Array(1 << 16));
      expect(Buffer.from(decode(view).buffer).equals(Buffer.from(small.bytes))).toBe(true);
      expect(entry.compBytes).toBe((entry.qualname === 'a' ? first : second).payload.length);
      expect((await store.verify({ decode: true })).problems).toEqual([]);
      await store.close();
    }
  });

  it('treats adding an existing key as a no-op that writes nothing', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const t = makeTensor([100], 2);
    await store.addEntry(toInput(t, 'a'));
    const before = (await stat(join(root, 'journal.1'))).size;
    expect(await store.addEntry(toInput(t, 'other-name'))).toEqual({ key: t.key, added: false, slicesBound: 0 });
    expect(await store.addEntries([toInput(t, 'x'), toInput(t, 'y')])).toEqual([
      { key: t.key, added: false, slicesBound: 0 },
      { key: t.key, added: false, slicesBound: 0 },
    ]);
    expect((await stat(join(root, 'journal.1'))).size).toBe(before);
    expect(store.getEntry(t.key)?.qualname).toBe('a');
    await store.close();
  });

  it('commits a batch as one journal record and never rewrites the manifest per entry', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const manifestBefore = await stat(join(root, 'manifest.json'));
    for (let batch = 0; batch < 20; batch++) {
      const tensors = Array.from({ length: 25 }, (_, i) => makeTensor([16, 8], 1000 + batch * 25 + i));
      const results = await store.addEntries(tensors.map((t, i) => toInput(t, `layer.${batch}.${i}`)));
      expect(results.every((r) => r.added)).toBe(true);
    }
    expect(store.size).toBe(500);
    const scan = await journalRecords(root, 1);
    expect(scan.records).toHaveLength(20);
    expect(scan.stop).toBe('end');
    const manifestAfter = await stat(join(root, 'manifest.json'));
    expect(manifestAfter.ino).toBe(manifestBefore.ino);
    expect(store.generation).toBe(1);
    await store.close();
  });

  it('deduplicates keys inside one batch and binds initial slice keys', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([10], 3);
    const results = await store.addEntries([toInput(t, 'first', [['s.safetensors', 0, 20]]), toInput(t, 'second')]);
    expect(results.map((r) => r.added)).toEqual([true, false]);
    expect(store.lookupBySlice('s.safetensors', 0, 20)?.qualname).toBe('first');
    await store.close();
    const again = await openCacheStore(root);
    expect(again.lookupBySlice('s.safetensors', 0, 20)?.key).toBe(t.key);
    await again.close();
  });

  it('onPayloadWritten hands the payload back once it is in the file, before the commit completes', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const [a, b, c] = [makeTensor([300, 7], 71), makeTensor([513], 72), makeTensor([64], 73)];
    await store.addEntry(toInput(c, 'present'));
    const original = a.payload.slice();
    const calls: string[] = [];
    const results = await store.addEntries([
      {
        ...toInput(a, 'a'),
        onPayloadWritten: () => {
          // Not committed yet (no journal record), and the memory is the caller's again: scribble on it.
          calls.push(`a committed=${store.getEntry(a.key) !== undefined}`);
          a.payload.fill(0xa5);
        },
      },
      { ...toInput(b, 'b'), onPayloadWritten: () => calls.push('b') },
      // Already cached, and a duplicate of this batch: nothing written, no call.
      { ...toInput(c, 'c again'), onPayloadWritten: () => calls.push('c') },
      { ...toInput(b, 'b again'), onPayloadWritten: () => calls.push('b again') },
    ]);
    expect(results.map((r) => r.added)).toEqual([true, true, false, false]);
    expect(calls.sort()).toEqual(['a committed=false', 'b']);
    // What was written is the payload as it was when handed over.
    const view = await store.readBlob(a.key, new Uint8Array(original.length));
    expect(Buffer.from(view).equals(Buffer.from(original))).toBe(true);
    expect(await store.verify({ decode: true })).toMatchObject({ ok: true, decoded: 3 });
    await store.close();
  });

  it('onPayloadWritten: a hook that throws does not break the commit; one that is not a function is refused', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([40, 3], 74);
    const bad = { ...toInput(t, 'bad'), onPayloadWritten: 'later' } as unknown as AddEntryInput;
    expect(await catchError(() => store.addEntry(bad))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('onPayloadWritten') });
    expect(store.getEntry(t.key)).toBeUndefined();
    const thrown = {
      ...toInput(t, 'thrower'),
      onPayloadWritten: () => {
        throw new Error('hook failed');
      },
    };
    expect(await store.addEntry(thrown)).toEqual({ key: t.key, added: true, slicesBound: 0 });
    await store.close();
    const again = await openCacheStore(root);
    expect(again.getEntry(t.key)?.qualname).toBe('thrower');
    expect((await again.verify({ decode: true })).ok).toBe(true);
    await again.close();
  });

  it('accepts empty and odd-sized tensors', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    for (const [i, shape] of [[0], [1], [3, 5], [0, 7], [1, 1, 1, 127]].entries()) {
      const t = makeTensor(shape, 50 + i);
      expect((await store.addEntry(toInput(t, `t${i}`))).added).toBe(true);
      const view = await store.readBlob(t.key, new Uint8Array(t.payload.length));
      expect(Buffer.from(decode(view).buffer).equals(Buffer.from(t.bytes))).toBe(true);
    }
    expect((await store.verify({ decode: true })).ok).toBe(true);
    await store.close();
  });
});

describe('slice aliasing', () => {
  it('aliases by key or by bytes, persists, and returns false for absent entries', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64], 10);
    const b = makeTensor([64], 11);
    const missing = makeTensor([64], 12);
    await store.addEntries([toInput(a, 'a'), toInput(b, 'b')]);
    expect(await store.aliasSlice(a.key, 'model-00001.safetensors', 8, 128)).toBe(true);
    expect(await store.aliasSlice({ bytes: b.bytes, shape: b.shape, dtype: 'BF16' }, 'model-00001.safetensors', 136, 128)).toBe(true);
    expect(await store.aliasSlice(missing.key, 'model-00001.safetensors', 264, 128)).toBe(false);
    expect(await store.aliasSlice({ bytes: a.bytes, shape: a.shape, dtype: 'F16' }, 'x', 0, 128)).toBe(false);
    // Already bound to the same entry: true, nothing written.
    const size = (await stat(join(root, 'journal.1'))).size;
    expect(await store.aliasSlice(a.key, 'model-00001.safetensors', 8, 128)).toBe(true);
    expect((await stat(join(root, 'journal.1'))).size).toBe(size);
    expect(store.lookupBySlice('model-00001.safetensors', 8, 128)?.key).toBe(a.key);
    expect(store.lookupBySlice('model-00001.safetensors', 136, 128)?.key).toBe(b.key);
    expect(store.lookupBySlice('model-00001.safetensors', 8, 127)).toBeUndefined();
    expect(store.lookupBySlice('model-00002.safetensors', 8, 128)).toBeUndefined();
    await store.close();
    const again = await openCacheStore(root);
    expect(again.lookupBySlice('model-00001.safetensors', 136, 128)?.key).toBe(b.key);
    expect(again.getEntry(a.key)?.sliceKeys).toEqual([['model-00001.safetensors', 8, 128]]);
    await again.close();
  });

  it('refuses to bind a slice to a second entry (SLICE_CONFLICT), persisting nothing of the batch', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64], 20);
    const b = makeTensor([64], 21);
    await store.addEntries([toInput(a, 'a'), toInput(b, 'b')]);
    await store.aliasSlice(a.key, 'shard', 0, 128);
    const error = await catchError(() =>
      store.aliasSlices([
        { key: b.key, shardName: 'shard', offsetBytes: 128, sizeBytes: 128 },
        { key: b.key, shardName: 'shard', offsetBytes: 0, sizeBytes: 128 },
      ]),
    );
    expect(error.code).toBe('SLICE_CONFLICT');
    expect(error.details).toMatchObject({ boundKey: a.key, requestedKey: b.key, slice: ['shard', 0, 128] });
    expect(store.lookupBySlice('shard', 128, 128)).toBeUndefined();
    expect(store.lookupBySlice('shard', 0, 128)?.key).toBe(a.key);
    // Inside one batch, too.
    const inBatch = await catchError(() =>
      store.aliasSlices([
        { key: a.key, shardName: 'other', offsetBytes: 0, sizeBytes: 128 },
        { key: b.key, shardName: 'other', offsetBytes: 0, sizeBytes: 128 },
      ]),
    );
    expect(inBatch.code).toBe('SLICE_CONFLICT');
    // Adding an entry whose initial slice key is bound elsewhere.
    const c = makeTensor([64], 22);
    expect((await catchError(() => store.addEntry(toInput(c, 'c', [['shard', 0, 128]])))).code).toBe('SLICE_CONFLICT');
    expect(store.getEntry(c.key)).toBeUndefined();
    await store.close();
  });

  it('moves a slice with rebind: true (a shard replaced in place)', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64], 30);
    const b = makeTensor([64], 31);
    await store.addEntries([toInput(a, 'a'), toInput(b, 'b')]);
    await store.aliasSlices([
      { key: a.key, shardName: 'shard', offsetBytes: 0, sizeBytes: 128 },
      { key: a.key, shardName: 'shard', offsetBytes: 512, sizeBytes: 128 },
    ]);
    expect(await store.aliasSlices([{ key: b.key, shardName: 'shard', offsetBytes: 0, sizeBytes: 128 }], { rebind: true })).toEqual([true]);
    expect(store.lookupBySlice('shard', 0, 128)?.key).toBe(b.key);
    expect(store.getEntry(a.key)?.sliceKeys).toEqual([['shard', 512, 128]]);
    const reader = await openCacheStore(root);
    expect(reader.lookupBySlice('shard', 0, 128)?.key).toBe(b.key);
    expect(reader.getEntry(a.key)?.sliceKeys).toEqual([['shard', 512, 128]]);
    await reader.close();
    await store.close();
    const again = await openCacheStore(root);
    expect(again.getEntry(b.key)?.sliceKeys).toEqual([['shard', 0, 128]]);
    await again.close();
  });

  it('records shard stamps with a binding: added per file, the latest MAX_SLICE_STAMPS kept, reset by a rebind, persisted in journal and manifest', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64], 32);
    const b = makeTensor([64], 33);
    await store.addEntries([{ ...toInput(a, 'a'), sliceKeys: [['shard', 0, 128, ['100:1']]] }, toInput(b, 'b')]);
    expect(store.lookupSliceBinding('shard', 0, 128)).toMatchObject({ entry: { key: a.key }, stamps: ['100:1'] });
    // The same file's stamp again writes nothing; another file's (a copy) is added.
    const journalBytes = async () => (await stat(join(root, `journal.${store.generation}`))).size;
    const before = await journalBytes();
    expect(await store.aliasSlice(a.key, 'shard', 0, 128, '100:1')).toBe(true);
    expect(await store.aliasSlice(a.key, 'shard', 0, 128)).toBe(true);
    expect(await journalBytes()).toBe(before);
    expect(await store.aliasSlice(a.key, 'shard', 0, 128, '100:2')).toBe(true);
    expect(store.lookupSliceBinding('shard', 0, 128)?.stamps).toEqual(['100:1', '100:2']);
    // A binding without stamps (an alias by a caller that has none) stays without.
    expect(await store.aliasSlice(a.key, 'shard', 512, 128)).toBe(true);
    expect(store.lookupSliceBinding('shard', 512, 128)?.stamps).toEqual([]);
    const reader = await openCacheStore(root);
    expect(reader.lookupSliceBinding('shard', 0, 128)?.stamps).toEqual(['100:1', '100:2']);
    // The latest MAX_SLICE_STAMPS are kept.
    for (let i = 3; i <= MAX_SLICE_STAMPS + 2; i++) await store.aliasSlice(a.key, 'shard', 0, 128, `100:${i}`);
    const kept = Array.from({ length: MAX_SLICE_STAMPS }, (_, i) => `100:${i + 3}`);
    expect(store.lookupSliceBinding('shard', 0, 128)?.stamps).toEqual(kept);
    await reader.refresh();
    expect(reader.lookupSliceBinding('shard', 0, 128)?.stamps).toEqual(kept);
    await reader.close();
    // A rebind to other bytes starts over with the new file's stamp.
    expect(await store.aliasSlices([{ key: b.key, shardName: 'shard', offsetBytes: 0, sizeBytes: 128, stamp: '100:99' }], { rebind: true })).toEqual([true]);
    expect(store.lookupSliceBinding('shard', 0, 128)).toMatchObject({ entry: { key: b.key }, stamps: ['100:99'] });
    await store.close();
    // Folded into the manifest: the seed's three fields, then the stamps.
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8'));
    expect(manifest.entries[b.key].slice_keys).toEqual([['shard', 0, 128, ['100:99']]]);
    expect(manifest.entries[a.key].slice_keys).toEqual([['shard', 512, 128]]);
    const again = await openCacheStore(root);
    expect(again.lookupSliceBinding('shard', 0, 128)?.stamps).toEqual(['100:99']);
    expect(again.lookupSliceBinding('shard', 4096, 128)).toBeUndefined();
    // Bad stamps are refused, from a caller and from a manifest.
    for (const stamp of ['', 'a\0b', 'x'.repeat(MAX_SLICE_STAMP_CHARS + 1)]) {
      expect((await catchError(() => again.aliasSlice(b.key, 'shard', 0, 128, stamp))).code).toBe('INVALID_ARGUMENT');
    }
    await again.close();
    for (const stamps of [[], ['a', 'a'], [7], 'a', Array.from({ length: MAX_SLICE_STAMPS + 1 }, (_, i) => `s${i}`)]) {
      const bad = structuredClone(manifest);
      bad.entries[b.key].slice_keys = [['shard', 0, 128, stamps]];
      await writeSignedManifest(join(root, 'manifest.json'), bad);
      const error = await catchError(() => openCacheStore(root));
      expect(error.code).toBe('MANIFEST_INVALID');
      expect(error.details?.entryCode).toBe('ENTRY_INVALID');
    }
  });

  it('rejects a slice whose size is not the tensor size (SLICE_SIZE_MISMATCH) and bad slice arguments', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64], 40);
    await store.addEntry(toInput(a, 'a'));
    const error = await catchError(() => store.aliasSlice(a.key, 'shard', 0, 64));
    expect(error.code).toBe('SLICE_SIZE_MISMATCH');
    expect(error.entry).toBe(a.key);
    for (const [shard, offset, size] of [['', 0, 128], ['s', -1, 128], ['s', 0.5, 128], ['s', 0, Number.NaN], ['a\0b', 0, 128]] as const) {
      expect((await catchError(() => store.aliasSlice(a.key, shard, offset, size))).code).toBe('INVALID_ARGUMENT');
    }
    expect((await catchError(() => store.aliasSlice('not-a-key', 's', 0, 128))).code).toBe('INVALID_ARGUMENT');
    // Raw bytes, or a reference missing its shape or dtype, name no tensor: refused, not "no such entry" (false).
    for (const ref of [a.bytes, {}, { bytes: a.bytes }, { bytes: a.bytes, shape: [64] }, { shape: [64], dtype: 'BF16' }]) {
      expect((await catchError(() => store.aliasSlice(ref as never, 's', 0, 128))).code).toBe('INVALID_ARGUMENT');
    }
    // A complete reference works; one of another dtype names a tensor that is never cached.
    expect(await store.aliasSlice({ bytes: a.bytes, shape: [64], dtype: 'BF16' }, 's', 0, 128)).toBe(true);
    expect(await store.aliasSlice({ bytes: a.bytes, shape: [32], dtype: 'F32' }, 's', 128, 128)).toBe(false);
    await store.close();
  });

  it('aliases 10,000 slices in one batch as one commit', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const tensors = Array.from({ length: 100 }, (_, i) => makeTensor([32], 500 + i));
    await store.addEntries(tensors.map((t, i) => toInput(t, `t${i}`)));
    const items = Array.from({ length: 10_000 }, (_, i) => ({ key: tensors[i % 100]!.key, shardName: `shard-${i % 7}`, offsetBytes: i * 64, sizeBytes: 64 }));
    const results = await store.aliasSlices(items);
    expect(results.every(Boolean)).toBe(true);
    const scan = await journalRecords(root, 1);
    expect(scan.records).toHaveLength(2);
    await store.close();
    const again = await openCacheStore(root);
    for (let i = 0; i < 10_000; i += 997) expect(again.lookupBySlice(`shard-${i % 7}`, i * 64, 64)?.key).toBe(tensors[i % 100]!.key);
    await again.close();
  });

  it('group-commits concurrent calls of one process', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const t = makeTensor([32], 60);
    await store.addEntry(toInput(t, 't'));
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.aliasSlice(t.key, 'shard', i * 64, 64)));
    expect(results.every(Boolean)).toBe(true);
    expect(store.getEntry(t.key)?.sliceKeys).toHaveLength(50);
    const scan = await journalRecords(root, 1);
    // One record for the add, then far fewer than 50 for the aliases.
    expect(scan.records.length).toBeLessThanOrEqual(4);
    await store.close();
  });
});

describe('many instances', () => {
  it('a reader picks up entries, aliases and compactions with refresh()', async () => {
    const root = await makeTempDir();
    const writer = await openCacheStore(root, { create: true });
    const reader = await openCacheStore(root);
    const a = makeTensor([64], 70);
    const b = makeTensor([64], 71);
    await writer.addEntry(toInput(a, 'a'));
    expect(reader.getEntry(a.key)).toBeUndefined();
    await reader.refresh();
    expect(reader.getEntry(a.key)?.qualname).toBe('a');
    await writer.aliasSlice(a.key, 's', 0, 128);
    await writer.compact();
    expect(writer.generation).toBe(2);
    await writer.addEntry(toInput(b, 'b'));
    await reader.refresh();
    expect(reader.generation).toBe(2);
    expect(reader.lookupBySlice('s', 0, 128)?.key).toBe(a.key);
    expect(reader.getEntry(b.key)?.qualname).toBe('b');
    // Two compactions between refreshes.
    await writer.compact();
    await writer.aliasSlice(b.key, 's', 128, 128);
    await writer.compact();
    await reader.refresh();
    expect(reader.generation).toBe(4);
    expect(reader.lookupBySlice('s', 128, 128)?.key).toBe(b.key);
    expect((await readdir(root)).sort()).toEqual(['blobs', 'journal.4', 'manifest.json']);
    await reader.close();
    await writer.close();
  });

  it('a reader\'s refresh ends while another instance compacts at every step it takes', async () => {
    const root = await makeTempDir();
    const writer = await openCacheStore(root, { create: true });
    const reader = await openCacheStore(root);
    const a = makeTensor([64], 75);
    await writer.addEntry(toInput(a, 'a'));
    // Each journal the reader opens is sealed by a compaction before the reader reads it, and the
    // next generation's too: a refresh that chased every generation would never end.
    const backend = (reader as unknown as { backend: { openJournal(generation: number): Promise<unknown> } }).backend;
    const openJournal = backend.openJournal.bind(backend);
    let compactions = 0;
    backend.openJournal = async (generation) => {
      const journal = await openJournal(generation);
      if (compactions < 20) {
        compactions++;
        await writer.aliasSlice(a.key, `churn-${compactions}`, 0, 128);
        await writer.compact();
      }
      return journal;
    };
    await writer.aliasSlice(a.key, 'before', 0, 128);
    await writer.compact();
    await reader.refresh();
    // Everything committed before the refresh is in; what came during it may be.
    expect(reader.lookupBySlice('before', 0, 128)?.key).toBe(a.key);
    expect(compactions).toBeGreaterThan(0);
    expect(compactions).toBeLessThan(20);
    backend.openJournal = openJournal;
    await reader.refresh();
    expect(reader.generation).toBe(writer.generation);
    expect(reader.lookupBySlice(`churn-${compactions}`, 0, 128)?.key).toBe(a.key);
    await reader.close();
    await writer.close();
  });

  it('a reader whose every journal is compacted away before it opens it gives up with a retryable LOCK_TIMEOUT', async () => {
    const root = await makeTempDir();
    const writer = await openCacheStore(root, { create: true });
    const reader = await openCacheStore(root, { lockTimeoutMs: 50 });
    const a = makeTensor([64], 76);
    await writer.addEntry(toInput(a, 'a'));
    const backend = (reader as unknown as { backend: { openJournal(generation: number): Promise<unknown> } }).backend;
    const openJournal = backend.openJournal.bind(backend);
    let churn = true;
    let compactions = 0;
    backend.openJournal = async (generation) => {
      if (churn) {
        compactions++;
        await writer.aliasSlice(a.key, `churn-${compactions}`, 0, 128);
        await writer.compact();
      }
      return openJournal(generation);
    };
    await writer.compact();
    const error = await catchError(() => reader.refresh());
    expect(error.code).toBe('LOCK_TIMEOUT');
    expect((error as { retryable?: boolean }).retryable).toBe(true);
    expect(error.message).toMatch(/compacted \d+ times/);
    churn = false;
    await reader.refresh();
    expect(reader.lookupBySlice(`churn-${compactions}`, 0, 128)?.key).toBe(a.key);
    await reader.close();
    await writer.close();
  });

  it('a second writer instance sees the first one\'s entries before deciding (no lost update)', async () => {
    const root = await makeTempDir();
    const w1 = await openCacheStore(root, { create: true });
    const w2 = await openCacheStore(root);
    const a = makeTensor([64], 80);
    await w1.addEntry(toInput(a, 'a'));
    // w2 has not refreshed; aliasing still finds the entry under the lock.
    expect(await w2.aliasSlice(a.key, 's', 0, 128)).toBe(true);
    await Promise.all([w1.aliasSlice(a.key, 's', 128, 128), w2.aliasSlice(a.key, 's', 256, 128)]);
    await w1.refresh();
    expect(w1.getEntry(a.key)?.sliceKeys.map((s) => s[1]).sort((x, y) => x - y)).toEqual([0, 128, 256]);
    await w1.close();
    await w2.close();
    const again = await openCacheStore(root);
    expect(again.getEntry(a.key)?.sliceKeys).toHaveLength(3);
    await again.close();
  });

  it('a long-lived reader notices a cache deleted and built again at its path (its own journal is gone), and a writer commits into the new one', async () => {
    const root = await makeTempDir();
    const a = makeTensor([64], 95);
    const b = makeTensor([64], 96);
    const first = await openCacheStore(root, { create: true });
    await first.addEntry(toInput(a, 'a', [['s', 0, 128]]));
    await first.close();
    const reader = await openCacheStore(root);
    const writer = await openCacheStore(root);
    expect(reader.lookupBySlice('s', 0, 128)?.key).toBe(a.key);
    await rm(root, { recursive: true, force: true });
    await new Promise((resolve) => setTimeout(resolve, 20)); // file times tick coarsely
    const rebuilt = await openCacheStore(root, { create: true });
    await rebuilt.addEntry(toInput(b, 'b', [['s', 0, 128]]));
    await rebuilt.close();
    await reader.refresh();
    expect(reader.lookupBySlice('s', 0, 128)?.key).toBe(b.key);
    expect(reader.getEntry(a.key)).toBeUndefined();
    // A writer opened on the old cache commits into the new one, where every reader sees it.
    expect(await writer.aliasSlice(b.key, 's', 128, 128)).toBe(true);
    const fresh = await openCacheStore(root);
    expect(fresh.lookupBySlice('s', 128, 128)?.key).toBe(b.key);
    for (const store of [reader, writer, fresh]) await store.close();
  });

  it('refreshes on a timer with refreshIntervalMs', async () => {
    const root = await makeTempDir();
    const writer = await openCacheStore(root, { create: true });
    const reader = await openCacheStore(root, { refreshIntervalMs: 20 });
    const a = makeTensor([64], 90);
    await writer.addEntry(toInput(a, 'a'));
    for (let i = 0; i < 100 && !reader.getEntry(a.key); i++) await new Promise((r) => setTimeout(r, 10));
    expect(reader.getEntry(a.key)?.key).toBe(a.key);
    await reader.close();
    await writer.close();
  });

  it('close() folds the journal into manifest.json', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64], 95);
    await store.addEntry(toInput(a, 'a', [['s', 0, 128]]));
    await store.close();
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8'));
    expect(manifest.generation).toBe(2);
    expect(manifest.entries[a.key]).toMatchObject({ qualname: 'a', blob: `blobs/${a.key}.bin`, raw_bytes: 128, slice_keys: [['s', 0, 128]], dtype: 'BF16', shape: [64], format_version: 3, sha256: a.sha256 });
    expect((await stat(join(root, 'journal.2'))).size).toBe(JOURNAL_HEADER_BYTES);
    expect((await catchError(() => store.aliasSlice(a.key, 's', 0, 128))).code).toBe('STORE_CLOSED');
    expect(() => store.getEntry(a.key)).toThrow(expect.objectContaining({ code: 'STORE_CLOSED' }));
  });
});

describe('journal recovery', () => {
  it('ignores a torn tail while reading and truncates it before the next append', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const a = makeTensor([64], 100);
    const b = makeTensor([64], 101);
    await store.addEntry(toInput(a, 'a'));
    await store.close();
    const journal = join(root, 'journal.1');
    const validSize = (await stat(journal)).size;
    // A torn record: a full header that promises more body than there is, then garbage.
    const torn = encodeJournalRecords([{ kind: 'alias', key: a.key, slice: ['s', 0, 128] }]);
    await appendFile(journal, torn.subarray(0, torn.length - 3));
    const reader = await openCacheStore(root, { compactOnClose: false });
    expect(reader.size).toBe(1);
    expect(reader.lookupBySlice('s', 0, 128)).toBeUndefined();
    await reader.addEntry(toInput(b, 'b'));
    const scan = await journalRecords(root, 1);
    expect(scan.stop).toBe('end');
    expect(scan.records).toHaveLength(2);
    expect(scan.records[0]!.endOffset).toBe(validSize);
    await reader.close();
    // A whole last record with a bad CRC and no zero-filled end is not a torn write but damage
    // (journal-recovery.test.ts): read up to it, reported, and not cut.
    const bytes = new Uint8Array(await readFile(journal));
    bytes[bytes.length - 2]! ^= 0xff;
    await writeFile(journal, bytes);
    const again = await openCacheStore(root, { compactOnClose: false });
    expect(again.getEntry(b.key)).toBeUndefined();
    expect(again.getEntry(a.key)).toBeDefined();
    expect((await again.verify()).problems[0]).toMatchObject({ code: 'JOURNAL_INVALID' });
    await again.close();
    expect((await stat(journal)).size).toBe(bytes.length);
  });

  it('finishes a compaction interrupted between the seal and the manifest rename', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const a = makeTensor([64], 110);
    await store.addEntry(toInput(a, 'a', [['s', 0, 128]]));
    await store.close();
    await appendFile(join(root, 'journal.1'), encodeJournalRecords([{ kind: 'seal', nextGeneration: 2 }]));
    const reader = await openCacheStore(root);
    expect(reader.generation).toBe(1);
    expect(reader.lookupBySlice('s', 0, 128)?.key).toBe(a.key);
    const writer = await openCacheStore(root);
    const b = makeTensor([64], 111);
    await writer.addEntry(toInput(b, 'b'));
    expect(writer.generation).toBe(2);
    await reader.refresh();
    expect(reader.generation).toBe(2);
    expect(reader.getEntry(b.key)?.qualname).toBe('b');
    expect(reader.lookupBySlice('s', 0, 128)?.key).toBe(a.key);
    await reader.close();
    await writer.close();
  });

  it('a compaction that fails after its seal (a full disk) loses no later commit and never takes the generation back', async () => {
    const root = await makeTempDir();
    const p = await openCacheStore(root, { create: true });
    const a = makeTensor([64], 120);
    await p.addEntry(toInput(a, 'a', [['s', 0, 128]]));
    // The manifest write of P's compaction fails once, after the new journal and the seal are written.
    const backend = (p as unknown as { backend: { writeManifest(bytes: Uint8Array): Promise<void> } }).backend;
    const writeManifest = backend.writeManifest.bind(backend);
    let failures = 1;
    backend.writeManifest = async (bytes) => {
      if (failures-- > 0) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
      return writeManifest(bytes);
    };
    await expect(p.compact()).rejects.toThrow();
    // P's next commit finishes the compaction first: nothing goes after the seal, where readers stop.
    expect(await p.aliasSlice(a.key, 's', 128, 128)).toBe(true);
    const fresh = await openCacheStore(root);
    expect(fresh.lookupBySlice('s', 128, 128)?.key).toBe(a.key);
    const generationSeen = fresh.generation;
    // Another writer commits; P closes (compacting): the other's commit stays, the generation only grows.
    expect(await fresh.aliasSlice(a.key, 's', 256, 128)).toBe(true);
    await fresh.close();
    await p.close();
    const last = await openCacheStore(root);
    expect(last.generation).toBeGreaterThanOrEqual(generationSeen);
    for (const offset of [0, 128, 256]) expect(last.lookupBySlice('s', offset, 128)?.key, `slice at ${offset}`).toBe(a.key);
    await last.close();
  });
});

describe('payload versions', () => {
  /** The same payload in format version 1 (FORMAT.md: six digests, the sm span hashed as one stream). */
  function toVersion1(payload: Uint8Array): Uint8Array {
    const v1 = payload.slice();
    const dv = new DataView(v1.buffer);
    dv.setUint16(4, 1, true);
    const total = Number(dv.getBigUint64(136, true));
    const bounds = [56, 72, 88, 104, 120].map((at) => Number(dv.getBigUint64(at, true)));
    bounds.push(total);
    const header = v1.slice(0, 256);
    header.fill(0, 252, 256);
    const digests = new DataView(new ArrayBuffer(24));
    digests.setUint32(0, xxh32(header), true);
    for (let s = 0; s < 5; s++) digests.setUint32(4 + 4 * s, xxh32(v1.subarray(bounds[s]!, bounds[s + 1]!)), true);
    dv.setUint32(252, xxh32(new Uint8Array(digests.buffer)), true);
    return v1;
  }

  it('an entry written with a version-1 payload is stored, reopened, read, verified and decoded as version 1', async () => {
    const root = await makeTempDir();
    const t = makeTensor([40, 33], 4242);
    const old = toVersion1(t.payload);
    expect(readPayloadMeta(old).version).toBe(1);
    let store = await openCacheStore(root, { create: true });
    await store.addEntry({ ...toInput(t, 'old'), payload: old });
    await store.close();
    store = await openCacheStore(root);
    const entry = store.getEntry(t.key)!;
    expect(entry.formatVersion).toBe(1);
    expect(entry.meta.version).toBe(1);
    const view = await store.readBlob(t.key, new Uint8Array(old.length));
    expect(decode(view)).toEqual(t.values);
    expect((await store.verify({ decode: true })).problems).toEqual([]);
    // A flipped sm byte of the version-1 blob is still caught.
    const bad = old.slice();
    bad[readPayloadMeta(old).layout.sm.offsetBytes + 3]! ^= 4;
    await writeFile(join(root, 'blobs', `${t.key}.bin`), bad);
    expect((await catchError(() => store.readBlob(t.key, new Uint8Array(old.length)))).code).toBe('BLOB_CORRUPT');
    await store.close();
  });
});
