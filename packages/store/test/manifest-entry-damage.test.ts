// A manifest that passes its checksum (or has none: pre-checksum manifests are read unchecked) but
// holds one bad entry (fuzz probe, 2026-12-07): every open failed with the entry's own code
// (ENTRY_INVALID, INVALID_CODEBOOK, …), which recoverDamagedManifest did not take for damage, so no
// tool opened the cache, `build --repair` included. Now it is MANIFEST_INVALID (the entry's code in
// details.entryCode), and the recovery keeps every other entry that checks against its blob.
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { signManifestText } from '@splitzip/test-support/manifest';
import { openCacheStore, recoverDamagedManifest } from '../src/index.js';
import { catchError, makeCache, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

type Loose = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Entry 0 of a 3-entry cache edited; the manifest signed again (`signed`) or written without body_crc32. */
async function damageEntry(edit: (entry: Loose, other: Loose) => void, signed: boolean): Promise<{ root: string; keys: string[]; bytes: Buffer }> {
  const { root, tensors } = await makeCache(3);
  const path = join(root, 'manifest.json');
  const manifest = JSON.parse(await readFile(path, 'utf8')) as Loose;
  const keys = tensors.map((t) => t.key);
  edit(manifest.entries[keys[0]!], manifest.entries[keys[1]!]);
  const { body_crc32: _dropped, ...rest } = manifest;
  // 1e400 has no JSON value of its own: written as text (JSON.parse reads it as Infinity).
  const text = JSON.stringify(rest).replace('"@BIG@"', '1e400');
  await writeFile(path, signed ? signManifestText(text) : text);
  return { root, keys, bytes: await readFile(path) };
}

const cases: [string, string, (e: Loose, other: Loose) => void, { entryKept?: boolean }?][] = [
  ['ENTRY_INVALID', 'escape_count 0 -> 1', (e) => (e.meta.escape_count += 1)],
  ['ENTRY_INVALID', 'shape [0]', (e) => (e.shape = [0])],
  ['INVALID_CODEBOOK', 'codebook null', (e) => (e.codebook = null)],
  ['UNSUPPORTED_PAYLOAD_VERSION', 'format_version 0', (e) => (e.format_version = 0)],
  ['UNSAFE_BLOB_PATH', 'blob ../manifest.json', (e) => (e.blob = '../manifest.json')],
  ['SIZE_INVALID', 'slice offset 1e400', (e) => (e.slice_keys[0][1] = '@BIG@'), { entryKept: true }],
  ['SLICE_CONFLICT', "another entry's slice key", (e, other) => (e.slice_keys = other.slice_keys), { entryKept: true }],
  ['ENTRY_INVALID', 'a 5000-char qualname', (e) => (e.qualname = 'q'.repeat(5000))],
];

for (const signed of [true, false]) {
  for (const [code, what, edit, { entryKept = false } = {}] of cases) {
    it(`${what} (${signed ? 'checksum passes' : 'no checksum'}): MANIFEST_INVALID (entryCode ${code}); recoverDamagedManifest keeps every entry that checks out`, async () => {
      const { root, keys } = await damageEntry(edit, signed);
      const error = await catchError(() => openCacheStore(root));
      expect(error.code).toBe('MANIFEST_INVALID');
      expect(error.path).toBe(join(root, 'manifest.json'));
      expect(error.details).toMatchObject({ reason: 'entry-invalid', entryCode: code });
      expect(error.message).toContain(code);
      const recovery = (await recoverDamagedManifest(root))!;
      expect(recovery).not.toBeNull();
      expect(recovery.salvagedEntries).toBe(entryKept ? 3 : 2);
      expect(recovery.droppedEntries).toEqual(entryKept ? [] : [keys[0]]);
      const store = await openCacheStore(root);
      try {
        expect(store.getEntry(keys[0]!) !== undefined).toBe(entryKept);
        for (const key of keys.slice(1)) expect(store.getEntry(key)).toBeDefined();
        expect((await store.verify({ decode: true })).ok).toBe(true);
      } finally {
        await store.close();
      }
    });
  }
}

it("a newer release's payload version is not damage: UNSUPPORTED_PAYLOAD_VERSION, and recoverDamagedManifest changes nothing", async () => {
  const { root, bytes } = await damageEntry((e) => ((e.format_version = 4), (e.meta.version = 4)), true);
  const error = await catchError(() => openCacheStore(root));
  expect(error.code).toBe('UNSUPPORTED_PAYLOAD_VERSION');
  expect(error.details?.newerRelease).toBe(true);
  expect(error.message).toMatch(/newer release/);
  expect((await catchError(() => recoverDamagedManifest(root))).code).toBe('UNSUPPORTED_PAYLOAD_VERSION');
  expect(await readFile(join(root, 'manifest.json'))).toEqual(bytes);
  expect((await readdir(root)).filter((name) => name.includes('damaged'))).toEqual([]);
});

it("a newer manifest format is not damage either: UNSUPPORTED_FORMAT, recoverDamagedManifest changes nothing", async () => {
  const { root } = await makeCache(1);
  const path = join(root, 'manifest.json');
  const manifest = JSON.parse(await readFile(path, 'utf8')) as Loose;
  const { body_crc32: _dropped, ...rest } = manifest;
  rest.format = 5; // 4 is this release's newest (an object's binding beside another)
  rest.entries[Object.keys(rest.entries)[0]!].shape = [0]; // an entry this release cannot read
  await writeFile(path, signManifestText(JSON.stringify(rest)));
  const bytes = await readFile(path);
  expect((await catchError(() => openCacheStore(root))).code).toBe('UNSUPPORTED_FORMAT');
  expect((await catchError(() => recoverDamagedManifest(root))).code).toBe('UNSUPPORTED_FORMAT');
  expect(await readFile(path)).toEqual(bytes);
});
