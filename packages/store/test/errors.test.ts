import { spawnSync } from 'node:child_process';
import { existsSync, fstatSync, readdirSync, readlinkSync, readSync, realpathSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, symlink, truncate, unlink, utimes, writeFile, copyFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { writeSignedManifest } from '@splitzip/test-support/manifest';
import { afterEach, describe, expect, it } from 'vitest';
import { decode } from '@splitzip/codec';
import { countOpenBlobFiles, MAX_BLOB_BYTES, MAX_JOURNAL_BYTES, MAX_MANIFEST_BYTES, MAX_OPEN_BLOB_FILES, MAX_SLICE_KEYS_PER_ENTRY, MAX_LOCK_BREAK_DEPTH, openCacheStore, TEMP_FILE_MAX_AGE_MS } from '../src/index.js';
import { pidSpaceTag } from '../src/write-lock.js';
import { catchError, frameJournalRecord, makeCache, makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';

afterEach(removeTempDirs);

// Manifests are edited as loose JSON here, on purpose: the point is to write what the types forbid.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = Record<string, any>;

async function editManifest(root: string, edit: (manifest: Loose) => void): Promise<void> {
  const path = join(root, 'manifest.json');
  const manifest = JSON.parse(await readFile(path, 'utf8'));
  edit(manifest);
  await writeSignedManifest(path, manifest);
}

function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' });
  return child.pid!;
}

/**
 * How many descriptors this process holds on `file` (Linux: /proc/self/fd; elsewhere 1, and the
 * count of kept blob files says enough). Counted by target, not in total: other tests' sockets and
 * files come and go meanwhile.
 */
function descriptorsOn(file: string): () => number {
  const target = realpathSync(file);
  return () => {
    if (!existsSync('/proc/self/fd')) return 1;
    return readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`) === target;
      } catch {
        return false; // closed while listed
      }
    }).length;
  };
}

describe('the manifest is input', () => {
  const entryCases: [string, string, (e: Loose) => void][] = [
    ['UNSAFE_BLOB_PATH', 'absolute', (e) => (e.blob = '/etc/passwd')],
    ['UNSAFE_BLOB_PATH', 'dot-dot', (e) => (e.blob = 'blobs/../../secret.bin')],
    ['UNSAFE_BLOB_PATH', 'not-canonical', (e) => (e.blob = 'blobs/.tmp-1-0123456789abcdef.bin')],
    ['UNSAFE_BLOB_PATH', 'invalid', (e) => (e.blob = 42)],
    ['SIZE_INVALID', 'raw_bytes', (e) => (e.raw_bytes = -2)],
    ['SIZE_INVALID', 'raw_bytes', (e) => (e.raw_bytes = 2.5)],
    ['SIZE_INVALID', 'comp_bytes', (e) => (e.comp_bytes = MAX_BLOB_BYTES + 256)],
    ['SIZE_INVALID', 'meta.element_count', (e) => (e.meta.element_count = 2 ** 40)],
    ['SIZE_INVALID', 'meta.escape_count', (e) => (e.meta.escape_count = e.meta.element_count + 1)],
    ['SIZE_INVALID', 'meta.checksum', (e) => (e.meta.checksum = -1)],
    ['ENTRY_INVALID', 'comp_bytes', (e) => (e.comp_bytes += 256)],
    ['ENTRY_INVALID', 'meta.comp_bytes', (e) => ((e.meta.comp_bytes += 256), (e.comp_bytes += 256))],
    ['ENTRY_INVALID', 'chunk_count', (e) => (e.meta.chunk_count += 1)],
    ['ENTRY_INVALID', 'chunk_size', (e) => (e.meta.chunk_size = 100)],
    ['ENTRY_INVALID', 'shape', (e) => (e.shape = [40, 4])],
    ['ENTRY_INVALID', 'shape', (e) => (e.shape = 'big')],
    ['ENTRY_INVALID', 'dtype', (e) => (e.dtype = 'F16')],
    ['ENTRY_INVALID', 'qualname', (e) => delete e.qualname],
    ['ENTRY_INVALID', 'blob_checksum', (e) => (e.blob_checksum = 'xxh32:00000000')],
    ['ENTRY_INVALID', 'blob_checksum', (e) => (e.blob_checksum = 'crc32:00000000')],
    ['ENTRY_INVALID', 'sha256', (e) => (e.sha256 = 'abc')],
    ['ENTRY_INVALID', 'blob_sha256', (e) => (e.blob_sha256 = 'A'.repeat(64))],
    ['ENTRY_INVALID', 'slice_keys', (e) => (e.slice_keys = [['shard-0', 0, 240], ['shard-0', 0, 240]])],
    ['SIZE_INVALID', 'slice offset', (e) => (e.slice_keys = [['shard-0', -5, 240]])],
    ['ENTRY_INVALID', 'slice_keys', (e) => (e.slice_keys = 'none')],
    ['ENTRY_INVALID', 'meta', (e) => (e.meta = null)],
    ['SLICE_SIZE_MISMATCH', 'slice size', (e) => (e.slice_keys = [['shard-0', 0, 241]])],
    ['INVALID_CODEBOOK', 'duplicate exponents', (e) => (e.codebook = { exponents: [127, 127] })],
    ['INVALID_CODEBOOK', '17 exponents', (e) => (e.codebook = { exponents: Array.from({ length: 17 }, (_, i) => i) })],
    ['INVALID_CODEBOOK', 'not an object', (e) => (e.codebook = [1, 2])],
    ['UNSUPPORTED_PAYLOAD_VERSION', 'format_version', (e) => (e.format_version = 4)],
    ['UNSUPPORTED_PAYLOAD_VERSION', 'meta.version', (e) => (e.meta.version = 4)],
  ];
  for (const [code, what, edit] of entryCases) {
    it(`${code}: ${what}`, async () => {
      const { root, tensors } = await makeCache();
      const key = tensors[0]!.key;
      await editManifest(root, (m) => edit(m.entries[key]));
      const error = await catchError(() => openCacheStore(root));
      // Damage to one entry is the manifest's (recoverDamagedManifest salvages it), the entry's own
      // code kept; a newer release's payload version (4) is not damage.
      const newer = code === 'UNSUPPORTED_PAYLOAD_VERSION';
      expect(error.code).toBe(newer ? code : 'MANIFEST_INVALID');
      if (!newer) expect(error.details).toMatchObject({ reason: 'entry-invalid', entryCode: code });
      expect(error.entry).toBe(key);
      expect(error.path).toBe(join(root, 'manifest.json'));
      expect(error.message).toContain(key);
    });
  }

  it('ENTRY_INVALID: a key that is not 40 hex digits', async () => {
    const { root, tensors } = await makeCache();
    await editManifest(root, (m) => {
      m.entries['../../etc'] = m.entries[tensors[0]!.key];
      delete m.entries[tensors[0]!.key];
    });
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('MANIFEST_INVALID');
    expect(error.details?.entryCode).toBe('ENTRY_INVALID');
  });

  it('SLICE_CONFLICT: one slice listed under two entries', async () => {
    const { root, tensors } = await makeCache(2);
    await editManifest(root, (m) => (m.entries[tensors[1]!.key].slice_keys = [['shard-0', 0, 240]]));
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('MANIFEST_INVALID');
    expect(error.details?.entryCode).toBe('SLICE_CONFLICT');
    expect([tensors[0]!.key, tensors[1]!.key]).toContain(error.entry);
  });

  it('MANIFEST_INVALID: one changed digit anywhere (a slice key bound to another tensor of the same size was served its bytes); a manifest without body_crc32 (written before it) opens', async () => {
    const { root, tensors } = await makeCache(2);
    const path = join(root, 'manifest.json');
    const signed = await readFile(path, 'utf8');
    expect(signed).toMatch(/,"body_crc32":"[0-9a-f]{8}"}\n$/);
    // shard-1's slice key moved to offset 1 (a plausible, unbound slice): no other check can see it.
    const moved = signed.replace('["shard-1",0,240]', '["shard-1",1,240]');
    expect(moved).not.toBe(signed);
    await writeFile(path, moved);
    const error = await catchError(() => openCacheStore(root));
    expect(error).toMatchObject({ code: 'MANIFEST_INVALID', path });
    expect(error.message).toMatch(/checksum mismatch/);
    // Not the last member, or not 8 hex digits: refused as well.
    const stated = /"body_crc32":"([0-9a-f]{8})"/.exec(signed)![1]!;
    for (const text of [signed.replace(/,"body_crc32":"[0-9a-f]{8}"}\n$/, '}').replace('{"format"', `{"body_crc32":"${stated}","format"`), signed.replace(/"body_crc32":"[0-9a-f]{8}"/, '"body_crc32":"XYZ"')]) {
      await writeFile(path, text);
      expect((await catchError(() => openCacheStore(root))).code).toBe('MANIFEST_INVALID');
    }
    // Line endings converted (CRLF) or white space after it: still the last member.
    await writeFile(path, signed.replace(/\n$/, '\r\n  '));
    await (await openCacheStore(root)).close();
    // Written before manifests carried one: read unchecked, and the next compaction adds it.
    const legacy = JSON.parse(signed) as Loose;
    delete legacy.body_crc32;
    await writeFile(path, JSON.stringify(legacy));
    const store = await openCacheStore(root);
    expect(store.lookupBySlice('shard-1', 0, 240)?.key).toBe(tensors[1]!.key);
    await store.addEntry(toInput(makeTensor([6, 6], 9251), 'after'));
    await store.close();
    expect(await readFile(path, 'utf8')).toMatch(/,"body_crc32":"[0-9a-f]{8}"}\n$/);
  });

  const topCases: [string, (m: Loose) => void][] = [
    ['UNSUPPORTED_FORMAT', (m) => (m.format = 1)],
    ['UNSUPPORTED_FORMAT', (m) => (m.format = 5)],
    ['UNSUPPORTED_FORMAT', (m) => delete m.format],
    ['MANIFEST_INVALID', (m) => (m.generation = 0)],
    ['MANIFEST_INVALID', (m) => (m.chunk_size = 1000)],
    ['MANIFEST_INVALID', (m) => (m.coverage_min = 'high')],
    ['MANIFEST_INVALID', (m) => (m.entries = [])],
  ];
  for (const [code, edit] of topCases) {
    it(`${code}: ${edit.toString()}`, async () => {
      const { root } = await makeCache();
      await editManifest(root, edit);
      const error = await catchError(() => openCacheStore(root));
      expect(error.code).toBe(code);
      expect(error.path).toBe(join(root, 'manifest.json'));
    });
  }

  it('rejects a seed (format 1) manifest with a rebuild hint', async () => {
    const root = await makeTempDir();
    await writeFile(join(root, 'manifest.json'), JSON.stringify({ format: 1, chunk_size: 1024, coverage_min: 0.99, entries: {} }));
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('UNSUPPORTED_FORMAT');
    expect(error.message).toContain('rebuild');
  });

  it('MANIFEST_INVALID for non-JSON, non-UTF-8 and non-object manifests', async () => {
    for (const content of ['{"format": 2,', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), '[1, 2]', 'null']) {
      const { root } = await makeCache();
      await writeFile(join(root, 'manifest.json'), content);
      expect((await catchError(() => openCacheStore(root))).code).toBe('MANIFEST_INVALID');
    }
  });

  it('SIZE_INVALID for a manifest above MAX_MANIFEST_BYTES (sparse file; never read)', async () => {
    const { root } = await makeCache();
    await truncate(join(root, 'manifest.json'), MAX_MANIFEST_BYTES + 1);
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('SIZE_INVALID');
    expect(error.details).toMatchObject({ limit: MAX_MANIFEST_BYTES });
  });
});

describe('the journal is input', () => {
  const frame = frameJournalRecord;

  it('reads records framed as documented', async () => {
    const { root, tensors } = await makeCache();
    await writeFile(join(root, 'journal.2'), Buffer.concat([await readFile(join(root, 'journal.2')), frame([[2, tensors[0]!.key, 'doc-shard', 240, 240]])]));
    const store = await openCacheStore(root);
    expect(store.lookupBySlice('doc-shard', 240, 240)?.key).toBe(tensors[0]!.key);
    await store.close();
  });

  const cases: [string, string, (key: string) => unknown[]][] = [
    ['JOURNAL_INVALID', 'unknown op', (key) => [[7, key]]],
    ['JOURNAL_INVALID', 'alias of an absent entry', () => [[2, 'f'.repeat(40), 's', 0, 240]]],
    ['JOURNAL_INVALID', 'not an array of ops', () => [5] as unknown[]],
    ['SIZE_INVALID', 'alias with a negative offset', (key) => [[2, key, 's', -1, 240]]],
    ['UNSAFE_BLOB_PATH', 'add with an absolute blob path', (key) => [[1, 'e'.repeat(40), { blob: '/etc/passwd', key }]]],
    ['SLICE_CONFLICT', 'second binding of a slice', () => [[2, 'PLACEHOLDER', 'shard-0', 0, 240]]],
  ];
  for (const [code, what, ops] of cases) {
    it(`${code}: ${what}`, async () => {
      const { root, tensors } = await makeCache(2);
      const body = JSON.parse(JSON.stringify(ops(tensors[0]!.key)).replace('PLACEHOLDER', tensors[1]!.key));
      const path = join(root, 'journal.2');
      await writeFile(path, Buffer.concat([await readFile(path), frame(body)]));
      // A valid CRC over invalid ops is damage at its offset (journal-invalid-ops.test.ts): readers
      // open with what comes before it, writers refuse with JOURNAL_INVALID naming the op's code.
      const store = await openCacheStore(root);
      try {
        const error = await catchError(() => store.gc());
        expect(error.code).toBe('JOURNAL_INVALID');
        expect(error.details).toMatchObject({ reason: 'invalid-ops', opCode: code });
      } finally {
        await store.close();
      }
    });
  }

  it('JOURNAL_INVALID / UNSUPPORTED_FORMAT for a bad journal header', async () => {
    const { root } = await makeCache();
    const path = join(root, 'journal.2');
    const header = await readFile(path);
    // A damaged header: the cache opens with its manifest's entries (journal-recovery.test.ts), and
    // writers refuse with JOURNAL_INVALID.
    const refusesWrites = async () => {
      const store = await openCacheStore(root, { compactOnClose: false });
      try {
        return (await catchError(() => store.addEntry(toInput(makeTensor([4, 4], 4711), 'w')))).code;
      } finally {
        await store.close();
      }
    };
    header.writeUInt32LE(9, 12);
    await writeFile(path, header);
    expect(await refusesWrites()).toBe('JOURNAL_INVALID');
    header.writeUInt32LE(2, 12);
    header.writeUInt32LE(4, 8); // version 3 is this release's newest (an object's binding beside another), 4 a newer one's
    await writeFile(path, header);
    expect((await catchError(() => openCacheStore(root))).code).toBe('UNSUPPORTED_FORMAT');
    await writeFile(path, Buffer.from('not a journal!!!'));
    expect(await refusesWrites()).toBe('JOURNAL_INVALID');
  });
});

describe('readBlob never returns wrong data', () => {
  it('ENTRY_NOT_FOUND and SLOT_TOO_SMALL (naming both sizes)', async () => {
    const { root, tensors } = await makeCache();
    const store = await openCacheStore(root);
    const t = tensors[0]!;
    expect((await catchError(() => store.readBlob('0'.repeat(40), new Uint8Array(1 << 16)))).code).toBe('ENTRY_NOT_FOUND');
    const error = await catchError(() => store.readBlob(t.key, new Uint8Array(t.payload.length - 1)));
    expect(error.code).toBe('SLOT_TOO_SMALL');
    expect(error.message).toContain(String(t.payload.length));
    expect(error.message).toContain(String(t.payload.length - 1));
    expect(error.details).toEqual({ slotBytes: t.payload.length - 1, payloadBytes: t.payload.length });
    expect((await catchError(() => store.readBlob(t.key, [] as unknown as Uint8Array))).code).toBe('INVALID_ARGUMENT');
    await store.close();
  });

  it('BLOB_CORRUPT for any flipped byte, BLOB_SIZE_MISMATCH, BLOB_MISSING', async () => {
    const { root, tensors } = await makeCache();
    const t = tensors[0]!;
    const path = join(root, 'blobs', `${t.key}.bin`);
    const store = await openCacheStore(root);
    const slot = new Uint8Array(t.payload.length);
    for (const at of [0, 5, 40, 252, 256, t.payload.length - 1, 300]) {
      const bytes = Buffer.from(t.payload);
      bytes[at]! ^= 0x10;
      await writeFile(path, bytes);
      const error = await catchError(() => store.readBlob(t.key, slot));
      expect(error.code).toBe('BLOB_CORRUPT');
      expect(error.entry).toBe(t.key);
    }
    // checkBlob looks at the file only: a flipped byte passes it, a wrong size or no file does not.
    await store.checkBlob(t.key);
    await writeFile(path, Buffer.from(t.payload).subarray(0, 300));
    expect((await catchError(() => store.readBlob(t.key, slot))).code).toBe('BLOB_SIZE_MISMATCH');
    expect((await catchError(() => store.checkBlob(t.key))).code).toBe('BLOB_SIZE_MISMATCH');
    await unlink(path);
    expect((await catchError(() => store.readBlob(t.key, slot))).code).toBe('BLOB_MISSING');
    expect((await catchError(() => store.checkBlob(t.key))).code).toBe('BLOB_MISSING');
    expect((await catchError(() => store.checkBlob('0'.repeat(40)))).code).toBe('ENTRY_NOT_FOUND');
    await writeFile(path, t.payload);
    await store.checkBlob(t.key);
    expect((await store.readBlob(t.key, slot)).length).toBe(t.payload.length);
    await store.close();
  });

  it('readBlobSync and openBlobSync: the same payload and the same typed errors as readBlob (corrupt, size, missing, link, directory, FIFO)', async () => {
    const { root, tensors } = await makeCache();
    const t = tensors[0]!;
    const path = join(root, 'blobs', `${t.key}.bin`);
    const store = await openCacheStore(root);
    const slot = new Uint8Array(t.payload.length + 64);
    expect(Buffer.from(store.readBlobSync!(t.key, slot)).equals(Buffer.from(t.payload))).toBe(true);
    const syncCode = (fn: () => unknown): string => {
      try {
        fn();
        return 'none';
      } catch (error) {
        return (error as { code: string }).code;
      }
    };
    // openBlobSync as a decode thread uses it: the descriptor read here, then finish (or close).
    const openAndRead = (options?: { verifyChecksum?: boolean }): Uint8Array => {
      const opened = store.openBlobSync!(t.key, slot);
      let passed = false;
      try {
        expect(opened.view.length).toBe(t.payload.length);
        let done = 0;
        while (done < opened.view.length) {
          const n = readSync(opened.fd, opened.view, done, opened.view.length - done, done);
          if (n === 0) throw new Error('short');
          done += n;
        }
        const view = opened.finish(options);
        passed = true;
        return view;
      } finally {
        opened.close(); // after finish: nothing left to give back
        // Bytes that passed: the descriptor is kept for the next read; else it is closed.
        if (passed) expect(fstatSync(opened.fd).size).toBe(t.payload.length);
        else expect(() => fstatSync(opened.fd)).toThrow(expect.objectContaining({ code: 'EBADF' }));
      }
    };
    expect(Buffer.from(openAndRead()).equals(Buffer.from(t.payload))).toBe(true);
    const both = async () => {
      const codes = [syncCode(() => store.readBlobSync!(t.key, slot)), (await catchError(() => store.readBlob(t.key, slot))).code];
      expect(syncCode(() => openAndRead())).toBe(codes[0]);
      return codes;
    };
    const flipped = Buffer.from(t.payload);
    flipped[t.payload.length - 1]! ^= 0x10;
    await writeFile(path, flipped);
    expect(await both()).toEqual(['BLOB_CORRUPT', 'BLOB_CORRUPT']);
    expect(syncCode(() => store.readBlobSync!(t.key, slot, { verifyChecksum: false }))).toBe('none');
    expect(syncCode(() => openAndRead({ verifyChecksum: false }))).toBe('none');
    await writeFile(path, Buffer.from(t.payload).subarray(0, 300));
    expect(await both()).toEqual(['BLOB_SIZE_MISMATCH', 'BLOB_SIZE_MISMATCH']);
    await unlink(path);
    expect(await both()).toEqual(['BLOB_MISSING', 'BLOB_MISSING']);
    await writeFile(join(root, 'elsewhere.bin'), t.payload);
    await symlink(join(root, 'elsewhere.bin'), path);
    expect(await both()).toEqual(['UNSAFE_BLOB_PATH', 'UNSAFE_BLOB_PATH']);
    await unlink(path);
    await mkdir(path);
    expect(await both()).toEqual(['UNSAFE_BLOB_PATH', 'UNSAFE_BLOB_PATH']);
    await rm(path, { recursive: true });
    // A FIFO must neither hang the open nor be read as a blob.
    expect(spawnSync('mkfifo', [path]).status).toBe(0);
    expect(await both()).toEqual(['UNSAFE_BLOB_PATH', 'UNSAFE_BLOB_PATH']);
    await unlink(path);
    await writeFile(path, t.payload);
    expect(store.readBlobSync!(t.key, slot).length).toBe(t.payload.length);
    await store.close();
  });

  it('a store closed while reads are in flight keeps none of their descriptors', async () => {
    const { root, tensors } = await makeCache(3);
    const base = countOpenBlobFiles();
    for (let round = 0; round < 5; round++) {
      const store = await openCacheStore(root);
      const reads = tensors.map((t) => store.readBlob(t.key, new Uint8Array(t.payload.length)).then(() => 'ok', (error: { code?: string }) => error.code));
      // An openBlobSync lent out over the close, given back (keep) after it.
      const lent = store.openBlobSync!(tensors[0]!.key, new Uint8Array(tensors[0]!.payload.length));
      await store.close();
      for (const result of await Promise.all(reads)) expect(['ok', 'STORE_CLOSED']).toContain(result);
      lent.release();
      // Before: each read that finished after close kept its descriptor, with no store left to close it.
      expect(countOpenBlobFiles()).toBe(base);
    }
  });

  it('readBlob and openBlobSync keep blob files open too: reused, given back closed on failure, dropped when damaged', async () => {
    const { root, tensors } = await makeCache(3);
    const store = await openCacheStore(root);
    const slot = new Uint8Array(4096);
    const base = countOpenBlobFiles();
    try {
      const [a, b, c] = tensors as [(typeof tensors)[0], (typeof tensors)[0], (typeof tensors)[0]];
      const fdsOnA = descriptorsOn(join(root, 'blobs', `${a.key}.bin`));
      expect(Buffer.from(await store.readBlob(a.key, slot)).equals(Buffer.from(a.payload))).toBe(true);
      expect(countOpenBlobFiles()).toBe(base + 1);
      expect(fdsOnA()).toBe(1);
      for (let k = 0; k < 4; k++) expect(Buffer.from(await store.readBlob(a.key, slot)).equals(Buffer.from(a.payload))).toBe(true);
      // The synchronous read takes the same kept descriptor.
      expect(Buffer.from(store.readBlobSync!(a.key, slot)).equals(Buffer.from(a.payload))).toBe(true);
      expect(fdsOnA()).toBe(1);
      // Two reads of one blob at once: each gets a descriptor, one is kept after.
      await Promise.all([store.readBlob(a.key, new Uint8Array(4096)), store.readBlob(a.key, new Uint8Array(4096))]);
      expect(countOpenBlobFiles()).toBe(base + 1);
      expect(fdsOnA()).toBe(1);

      // openBlobSync: release keeps the descriptor, and the next open lends the same one.
      const first = store.openBlobSync!(b.key, slot);
      first.release();
      expect(countOpenBlobFiles()).toBe(base + 2);
      const second = store.openBlobSync!(b.key, slot);
      expect(second.fd).toBe(first.fd);
      expect(countOpenBlobFiles()).toBe(base + 1); // lent out, not kept meanwhile
      second.close();
      expect(() => fstatSync(second.fd)).toThrow(expect.objectContaining({ code: 'EBADF' }));
      second.release(); // given back already: nothing happens
      expect(countOpenBlobFiles()).toBe(base + 1);

      // A damaged blob read through a kept descriptor: BLOB_CORRUPT, and the descriptor goes.
      await store.readBlob(c.key, slot);
      expect(countOpenBlobFiles()).toBe(base + 2);
      const path = join(root, 'blobs', `${c.key}.bin`);
      const flipped = Buffer.from(c.payload);
      flipped[flipped.length - 1]! ^= 0x10;
      await writeFile(path, flipped);
      expect((await catchError(() => store.readBlob(c.key, slot))).code).toBe('BLOB_CORRUPT');
      expect(countOpenBlobFiles()).toBe(base + 1);
      // Truncated: the size check of a fresh open refuses it, nothing kept.
      await truncate(path, 100);
      expect((await catchError(() => store.readBlob(c.key, slot))).code).toBe('BLOB_SIZE_MISMATCH');
      expect(countOpenBlobFiles()).toBe(base + 1);
    } finally {
      await store.close();
    }
    expect(countOpenBlobFiles()).toBe(base);
  });

  it('readBlobSync keeps blob files open between reads: bounded, reused, dropped when damaged, discarded or closed', async () => {
    const count = MAX_OPEN_BLOB_FILES + 6;
    const { root, tensors } = await makeCache(count);
    const store = await openCacheStore(root);
    const other = await openCacheStore(root); // a second handle on the same files
    const slot = new Uint8Array(4096);
    const base = countOpenBlobFiles();
    try {
      const first = tensors[0]!;
      const fdsOnFirst = descriptorsOn(join(root, 'blobs', `${first.key}.bin`));
      store.readBlobSync!(first.key, slot);
      expect(countOpenBlobFiles()).toBe(base + 1);
      expect(fdsOnFirst()).toBe(1);
      // Read again: the kept descriptor, no new one.
      for (let k = 0; k < 5; k++) expect(Buffer.from(store.readBlobSync!(first.key, slot)).equals(Buffer.from(first.payload))).toBe(true);
      expect(fdsOnFirst()).toBe(1);
      // Every blob once: never more than MAX_OPEN_BLOB_FILES kept, in the whole process.
      for (const t of tensors) expect(Buffer.from(store.readBlobSync!(t.key, slot)).equals(Buffer.from(t.payload))).toBe(true);
      for (const t of tensors.slice(0, 3)) other.readBlobSync!(t.key, slot);
      expect(countOpenBlobFiles()).toBeLessThanOrEqual(MAX_OPEN_BLOB_FILES);

      // Damaged in place: the check fails, the descriptor goes; a repaired file (a new one renamed
      // over it, as a rebuild writes it) is then read.
      const last = tensors[count - 1]!;
      const path = join(root, 'blobs', `${last.key}.bin`);
      store.readBlobSync!(last.key, slot);
      const kept = countOpenBlobFiles();
      const flipped = Buffer.from(last.payload);
      flipped[flipped.length - 1]! ^= 0x10;
      await writeFile(path, flipped);
      expect((await catchError(() => store.readBlobSync!(last.key, slot))).code).toBe('BLOB_CORRUPT');
      expect(countOpenBlobFiles()).toBe(kept - 1);
      await writeFile(`${path}.new`, last.payload);
      await rename(`${path}.new`, path);
      expect(Buffer.from(store.readBlobSync!(last.key, slot)).equals(Buffer.from(last.payload))).toBe(true);
      // Truncated in place: BLOB_SIZE_MISMATCH, whatever was kept.
      await truncate(path, 100);
      expect((await catchError(() => store.readBlobSync!(last.key, slot))).code).toBe('BLOB_SIZE_MISMATCH');
      await writeFile(path, last.payload);
      store.readBlobSync!(last.key, slot);

      // A reader that found the bytes wrong itself (verifyChecksum: false) discards what is kept.
      const before = countOpenBlobFiles();
      await store.discardLocalCopy!(last.key);
      expect(countOpenBlobFiles()).toBe(before - 1);
    } finally {
      await store.close();
      await other.close();
    }
    // Closing the stores closes every descriptor they kept (others' may have been pushed out too).
    expect(countOpenBlobFiles()).toBeLessThanOrEqual(base);
  });

  it('verifyChecksum: false leaves a body flip to the caller but still checks the header and the manifest', async () => {
    const { root, tensors } = await makeCache();
    const t = tensors[0]!;
    const path = join(root, 'blobs', `${t.key}.bin`);
    const store = await openCacheStore(root);
    const slot = new Uint8Array(t.payload.length);
    // A flip in the sm section: only the content checksum can see it.
    const body = Buffer.from(t.payload);
    body[t.payload.length - 1]! ^= 0x10;
    await writeFile(path, body);
    expect((await catchError(() => store.readBlob(t.key, slot))).code).toBe('BLOB_CORRUPT');
    const view = await store.readBlob(t.key, slot, { verifyChecksum: false });
    expect(Buffer.from(view).equals(body)).toBe(true);
    expect(() => decode(view)).toThrow(/checksum/);
    // A flip in the header is still refused.
    const header = Buffer.from(t.payload);
    header[5]! ^= 0x10;
    await writeFile(path, header);
    expect((await catchError(() => store.readBlob(t.key, slot, { verifyChecksum: false }))).code).toBe('BLOB_CORRUPT');
    await store.close();
  });

  it('META_MISMATCH for an intact payload of another tensor of the same size', async () => {
    const { root, tensors } = await makeCache(2);
    const [a, b] = tensors as [TestTensor, TestTensor];
    expect(a.payload.length).toBe(b.payload.length);
    await copyFile(join(root, 'blobs', `${b.key}.bin`), join(root, 'blobs', `${a.key}.bin`));
    const store = await openCacheStore(root);
    const error = await catchError(() => store.readBlob(a.key, new Uint8Array(a.payload.length)));
    expect(error.code).toBe('META_MISMATCH');
    expect(error.entry).toBe(a.key);
    await store.close();
  });

  it('UNSAFE_BLOB_PATH when the blob is a link (here one that leaves blobs/)', async () => {
    const { root, tensors } = await makeCache();
    const t = tensors[0]!;
    const outside = join(root, 'outside.bin');
    await writeFile(outside, t.payload);
    await unlink(join(root, 'blobs', `${t.key}.bin`));
    await symlink(outside, join(root, 'blobs', `${t.key}.bin`));
    const store = await openCacheStore(root);
    const error = await catchError(() => store.readBlob(t.key, new Uint8Array(t.payload.length)));
    expect(error.code).toBe('UNSAFE_BLOB_PATH');
    expect(error.details).toMatchObject({ reason: 'link' });
    const report = await store.verify();
    expect(report.problems.map((p) => p.code)).toEqual(['UNSAFE_BLOB_PATH']);
    await store.close();
  });
});

describe('more limits and odd files', () => {
  it('SIZE_INVALID past MAX_SLICE_KEYS_PER_ENTRY aliases of one entry', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([8], 9200);
    await store.addEntry(toInput(t, 't'));
    const items = Array.from({ length: MAX_SLICE_KEYS_PER_ENTRY }, (_, i) => ({ key: t.key, shardName: 's', offsetBytes: i * 16, sizeBytes: 16 }));
    expect((await store.aliasSlices(items)).every(Boolean)).toBe(true);
    const error = await catchError(() => store.aliasSlice(t.key, 's', MAX_SLICE_KEYS_PER_ENTRY * 16, 16));
    expect(error.code).toBe('SIZE_INVALID');
    expect(error.details).toMatchObject({ limit: MAX_SLICE_KEYS_PER_ENTRY });
    await store.close();
    const again = await openCacheStore(root);
    expect(again.getEntry(t.key)?.sliceKeys).toHaveLength(MAX_SLICE_KEYS_PER_ENTRY);
    await again.close();
  });

  it('SIZE_INVALID for a journal tail above MAX_JOURNAL_BYTES (sparse file; never read)', async () => {
    const { root } = await makeCache();
    await truncate(join(root, 'journal.2'), MAX_JOURNAL_BYTES + 1024);
    expect((await catchError(() => openCacheStore(root))).code).toBe('SIZE_INVALID');
  });

  it('UNSAFE_BLOB_PATH when the blob is a directory; BLOB_MISSING without blobs/', async () => {
    const { root, tensors } = await makeCache();
    const t = tensors[0]!;
    const blob = join(root, 'blobs', `${t.key}.bin`);
    await unlink(blob);
    await mkdir(blob);
    let store = await openCacheStore(root);
    const error = await catchError(() => store.readBlob(t.key, new Uint8Array(t.payload.length)));
    expect(error.code).toBe('UNSAFE_BLOB_PATH');
    expect(error.details).toMatchObject({ reason: 'not-a-file' });
    await store.close();
    await rm(join(root, 'blobs'), { recursive: true });
    store = await openCacheStore(root);
    expect((await catchError(() => store.readBlob(t.key, new Uint8Array(t.payload.length)))).code).toBe('BLOB_MISSING');
    await store.close();
  });
});

describe('verify', () => {
  it('passes a good cache (with decode) and reports each kind of damage per entry', async () => {
    const { root, tensors } = await makeCache(5);
    let store = await openCacheStore(root);
    const progress: number[] = [];
    const good = await store.verify({ decode: true, onProgress: (p) => progress.push(p.done) });
    expect(good).toMatchObject({ ok: true, checked: 5, passed: 5, decoded: 5, problems: [] });
    expect(progress).toEqual([1, 2, 3, 4, 5]);
    await store.close();
    const [a, b, c, d] = tensors as [TestTensor, TestTensor, TestTensor, TestTensor];
    const blob = (t: TestTensor) => join(root, 'blobs', `${t.key}.bin`);
    const flipped = Buffer.from(a.payload);
    flipped[400]! ^= 1;
    await writeFile(blob(a), flipped);
    await unlink(blob(b));
    await truncate(blob(c), 256);
    await copyFile(blob(tensors[4]!), blob(d));
    store = await openCacheStore(root);
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.passed).toBe(1);
    const byKey = Object.fromEntries(report.problems.map((p) => [p.key, p.code]));
    expect(byKey).toEqual({ [a.key]: 'BLOB_CORRUPT', [b.key]: 'BLOB_MISSING', [c.key]: 'BLOB_SIZE_MISMATCH', [d.key]: 'META_MISMATCH' });
    await store.close();
  });

  it('decode: true catches a blob that is intact but not the original tensor (DIGEST_MISMATCH)', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([50], 9000);
    await store.addEntry({ ...toInput(t, 'liar'), sha256: '0'.repeat(64) });
    expect((await store.verify()).ok).toBe(true);
    const report = await store.verify({ decode: true });
    expect(report.problems).toEqual([expect.objectContaining({ key: t.key, code: 'DIGEST_MISMATCH', qualname: 'liar' })]);
    await store.close();
  });

  it('decode: true checks the content key itself: an entry without a sha256 whose blob is another tensor (DIGEST_MISMATCH)', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([50], 9000);
    const other = makeTensor([50], 9001);
    // Valid payload, valid header, valid checksum: only the decoded bytes tell it is not `t`.
    await store.addEntry({ key: t.key, qualname: 'swapped', payload: other.payload, shape: t.shape, dtype: 'BF16' });
    expect(store.getEntry(t.key)?.sha256).toBeNull();
    expect((await store.verify()).ok).toBe(true);
    const report = await store.verify({ decode: true });
    expect(report.problems).toEqual([expect.objectContaining({ key: t.key, code: 'DIGEST_MISMATCH', qualname: 'swapped' })]);
    expect(report.problems[0]!.message).toMatch(/content key/);
    await store.close();
  });

  it('an entry without sha256 is written without one, reopens with null, and verifies by its content key', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([7, 33], 9002);
    const { sha256: _omitted, ...input } = toInput(t, 'no-sha');
    await store.addEntry(input);
    // null means none too: another store's CacheEntry can be passed as it is.
    const u = makeTensor([9], 9003);
    await store.addEntry({ ...toInput(u, 'null-sha'), sha256: null });
    expect(store.getEntry(u.key)?.sha256).toBeNull();
    await store.close();
    const reopened = await openCacheStore(root);
    expect(reopened.getEntry(t.key)?.sha256).toBeNull();
    const report = await reopened.verify({ decode: true });
    expect(report).toMatchObject({ ok: true, decoded: 2 });
    await reopened.compact();
    await reopened.close();
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as Loose;
    expect(manifest.entries[t.key]).not.toHaveProperty('sha256');
    expect(manifest.entries[t.key].blob_sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('recordBlobSha256: false records no blob_sha256; the XXH32 still catches a damaged blob', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([40, 30], 9004);
    await store.addEntry({ ...toInput(t, 'no-blob-sha'), recordBlobSha256: false });
    const entry = store.getEntry(t.key)!;
    expect(entry.blobSha256).toBeNull();
    expect(await store.verify({ decode: true })).toMatchObject({ ok: true, decoded: 1 });
    await store.close();
    const manifestPath = join(root, 'manifest.json');
    const reopened = await openCacheStore(root);
    expect(reopened.getEntry(t.key)?.blobSha256).toBeNull();
    await reopened.compact();
    await reopened.close();
    const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as Loose;
    expect(manifest.entries[t.key]).not.toHaveProperty('blob_sha256');
    // One flipped bit in the sm section: the payload's own checksum (covering every byte) catches it.
    const blobPath = join(root, entry.blob);
    const blob = await readFile(blobPath);
    blob[blob.length - 7]! ^= 0x10;
    await writeFile(blobPath, blob);
    const damaged = await openCacheStore(root);
    expect((await damaged.verify()).problems).toEqual([expect.objectContaining({ key: t.key, code: 'BLOB_CORRUPT' })]);
    expect((await catchError(() => damaged.readBlob(t.key, new Uint8Array(entry.compBytes)))).code).toBe('BLOB_CORRUPT');
    await damaged.close();
  });

  it('a manifest entry that drops its sha256 still opens (the field is optional)', async () => {
    const { root, tensors } = await makeCache(2);
    const t = tensors[0]!;
    await editManifest(root, (m) => delete m.entries[t.key].sha256);
    const store = await openCacheStore(root);
    expect(store.getEntry(t.key)?.sha256).toBeNull();
    expect(store.getEntry(tensors[1]!.key)?.sha256).toBe(tensors[1]!.sha256);
    expect((await store.verify({ decode: true })).ok).toBe(true);
    await store.close();
  });

  it('a rewritten blob with a valid checksum is caught by blob_sha256', async () => {
    const { root, tensors } = await makeCache();
    const t = tensors[0]!;
    await editManifest(root, (m) => (m.entries[t.key].blob_sha256 = 'a'.repeat(64)));
    const store = await openCacheStore(root);
    expect((await store.verify()).problems.map((p) => p.code)).toEqual(['BLOB_CORRUPT']);
    await store.close();
  });
});

describe('addEntry input', () => {
  it('rejects bad keys, payloads, shapes, dtypes, digests and slice keys', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const t = makeTensor([10, 10], 9100);
    const corrupted = t.payload.slice();
    corrupted[300]! ^= 4;
    const cases: [string, Record<string, unknown>][] = [
      ['INVALID_ARGUMENT', { key: 'XYZ' }],
      ['INVALID_ARGUMENT', { key: t.key.toUpperCase() }],
      ['INVALID_ARGUMENT', { payload: corrupted }],
      ['INVALID_ARGUMENT', { payload: t.payload.subarray(0, 100) }],
      ['INVALID_ARGUMENT', { payload: 'bytes' }],
      ['INVALID_ARGUMENT', { shape: [10, 11] }],
      ['INVALID_ARGUMENT', { shape: [-10, -10] }],
      ['INVALID_ARGUMENT', { dtype: 'F16' }],
      ['INVALID_ARGUMENT', { sha256: 'nope' }],
      ['INVALID_ARGUMENT', { qualname: 7 }],
      ['INVALID_ARGUMENT', { sliceKeys: [['s', 0, 200], ['s', 0, 200]] }],
      ['INVALID_ARGUMENT', { sliceKeys: [['', 0, 200]] }],
      ['SLICE_SIZE_MISMATCH', { sliceKeys: [['s', 0, 199]] }],
    ];
    for (const [code, override] of cases) {
      const error = await catchError(() => store.addEntry({ ...toInput(t, 'q'), ...override } as never));
      expect(error.code, JSON.stringify(Object.keys(override))).toBe(code);
    }
    expect(store.size).toBe(0);
    await store.close();
  });
});

describe('writer lock', () => {
  async function writeLock(root: string, holder: Record<string, unknown>, name = 'lock'): Promise<void> {
    await writeFile(join(root, name), JSON.stringify({ host: hostname(), bootId: null, startTicks: null, token: '0123456789abcdef', createdMs: Date.now(), ...holder }));
  }

  it('recovers the lock of a dead process', async () => {
    const { root, tensors } = await makeCache();
    await writeLock(root, { pid: deadPid() });
    const store = await openCacheStore(root, { lockTimeoutMs: 2000 });
    expect(await store.aliasSlice(tensors[0]!.key, 'after-crash', 0, 240)).toBe(true);
    await store.close();
  });

  it('recovers a lock whose pid was reused (start time differs) and one from another boot', async () => {
    const { root, tensors } = await makeCache();
    const store = await openCacheStore(root, { lockTimeoutMs: 2000 });
    await writeLock(root, { pid: process.ppid, startTicks: 1 });
    expect(await store.aliasSlice(tensors[0]!.key, 'reused', 0, 240)).toBe(true);
    await writeLock(root, { pid: process.ppid, bootId: 'another-boot' });
    expect(await store.aliasSlice(tensors[0]!.key, 'rebooted', 0, 240)).toBe(true);
    await store.close();
  });

  it('recovers even when a previous recoverer died holding the break marker', async () => {
    const { root, tensors } = await makeCache();
    await writeLock(root, { pid: deadPid() });
    await writeLock(root, { pid: deadPid(), token: 'fedcba9876543210' }, 'lock.break-0123456789abcdef');
    const store = await openCacheStore(root, { lockTimeoutMs: 2000 });
    expect(await store.aliasSlice(tensors[0]!.key, 'nested', 0, 240)).toBe(true);
    await store.close();
    const names = (await import('node:fs/promises')).readdir(root);
    expect((await names).filter((n) => n.startsWith('lock'))).toEqual([]);
  });

  it('recovers a chain of break markers as deep as the recursion goes (one crash per level)', async () => {
    const { root, tensors } = await makeCache();
    const tokens = ['0123456789abcdef', '1111111111111111', '2222222222222222', '3333333333333333', '4444444444444444'];
    let name = 'lock';
    for (const [level, token] of tokens.entries()) {
      await writeLock(root, { pid: deadPid(), token }, name);
      if (level < tokens.length - 1) name = `${name}.break-${token}`;
    }
    // The last marker written sits at MAX_LOCK_BREAK_DEPTH: nothing deeper can serialize its removal.
    expect(name.split('.break-').length - 1).toBe(MAX_LOCK_BREAK_DEPTH);
    const store = await openCacheStore(root, { lockTimeoutMs: 2000 });
    expect(await store.aliasSlice(tensors[0]!.key, 'deep', 0, 240)).toBe(true);
    await store.close();
    expect((await readdir(root)).filter((n) => n.startsWith('lock'))).toEqual([]);
  });

  it('waits for a live holder and then fails with LOCK_TIMEOUT naming it; never breaks a foreign host lock', async () => {
    const { root, tensors } = await makeCache();
    const store = await openCacheStore(root, { lockTimeoutMs: 150, compactOnClose: false });
    await writeLock(root, { pid: process.ppid, startTicks: null });
    const error = await catchError(() => store.aliasSlice(tensors[0]!.key, 'blocked', 0, 240));
    expect(error.code).toBe('LOCK_TIMEOUT');
    expect(error.message).toContain(`pid ${process.ppid}`);
    await writeLock(root, { pid: deadPid(), host: 'some-other-host' });
    expect((await catchError(() => store.aliasSlice(tensors[0]!.key, 'blocked', 0, 240))).code).toBe('LOCK_TIMEOUT');
    expect(store.lookupBySlice('blocked', 0, 240)).toBeUndefined();
    await unlink(join(root, 'lock'));
    expect(await store.aliasSlice(tensors[0]!.key, 'blocked', 0, 240)).toBe(true);
    await store.close();
  });

  it('breaks an unparseable lock only once it is old', async () => {
    const { root, tensors } = await makeCache();
    const store = await openCacheStore(root, { lockTimeoutMs: 150 });
    await writeFile(join(root, 'lock'), '');
    expect((await catchError(() => store.aliasSlice(tensors[0]!.key, 'x', 0, 240))).code).toBe('LOCK_TIMEOUT');
    const old = new Date(Date.now() - 60_000);
    await utimes(join(root, 'lock'), old, old);
    expect(await store.aliasSlice(tensors[0]!.key, 'x', 0, 240)).toBe(true);
    await store.close();
  });
});

describe('gc', () => {
  it('removes orphan blobs, dead temp files, old journals and stale locks; keeps live temp files; reports unknown files', async () => {
    const { root, tensors } = await makeCache();
    const dead = deadPid();
    const orphanKey = 'c'.repeat(40);
    await writeFile(join(root, 'blobs', `${orphanKey}.bin`), Buffer.alloc(512));
    await writeFile(join(root, 'blobs', `.tmp-${dead}-0123456789abcdef.${pidSpaceTag()}.bin`), Buffer.alloc(10));
    await writeFile(join(root, 'blobs', `.tmp-${process.ppid}-0123456789abcdef.bin`), Buffer.alloc(10));
    await writeFile(join(root, `.tmp-${dead}-0123456789abcdef.${pidSpaceTag()}.manifest`), '{}');
    await writeFile(join(root, 'journal.1'), 'old');
    await writeFile(join(root, 'journal.7'), 'future leftover');
    await writeFile(join(root, 'lock'), JSON.stringify({ pid: dead, host: hostname(), token: 'aaaaaaaaaaaaaaaa', createdMs: 0 }));
    await writeFile(join(root, 'lock.break-bbbbbbbbbbbbbbbb'), JSON.stringify({ pid: dead, host: hostname(), token: 'bbbbbbbbbbbbbbbb', createdMs: 0 }));
    await writeFile(join(root, 'notes.txt'), 'user file');
    await mkdir(join(root, 'blobs', 'subdir'));
    const store = await openCacheStore(root);
    const listing = async () => [...(await readdir(root)).sort(), ...(await readdir(join(root, 'blobs'))).sort()];
    const before = await listing();
    const dry = await store.gc({ dryRun: true });
    expect(dry.dryRun).toBe(true);
    expect(dry.orphanBlobs).toEqual([`blobs/${orphanKey}.bin`]);
    // A dry run takes no writer lock: it reports the dead holder's lock a real gc would recover, and leaves it.
    expect(dry.staleLocks.sort()).toEqual(['lock', 'lock.break-bbbbbbbbbbbbbbbb']);
    expect(dry.oldJournals.sort()).toEqual(['journal.1', 'journal.7']);
    expect(dry.finishedCompaction).toBeUndefined();
    expect(await listing()).toEqual(before);
    const report = await store.gc();
    expect(report.orphanBlobs).toEqual([`blobs/${orphanKey}.bin`]);
    expect(report.orphanBytes).toBe(512);
    expect(report.tempFiles.sort()).toEqual([`.tmp-${dead}-0123456789abcdef.${pidSpaceTag()}.manifest`, `blobs/.tmp-${dead}-0123456789abcdef.${pidSpaceTag()}.bin`].sort());
    expect(report.oldJournals.sort()).toEqual(['journal.1', 'journal.7']);
    expect(report.staleLocks.sort()).toEqual(['lock', 'lock.break-bbbbbbbbbbbbbbbb']);
    expect(report.unknownFiles.sort()).toEqual(['blobs/subdir', 'notes.txt']);
    expect((await readdir(root)).sort()).toEqual(['blobs', 'journal.2', 'manifest.json', 'notes.txt']);
    expect((await readdir(join(root, 'blobs'))).sort()).toEqual([`.tmp-${process.ppid}-0123456789abcdef.bin`, `${tensors[0]!.key}.bin`, 'subdir'].sort());
    expect((await store.verify()).ok).toBe(true);
    await store.close();
    await rm(join(root, 'blobs', 'subdir'), { recursive: true });
  });

  it('removes a live pid\'s temp file once TEMP_FILE_MAX_AGE_MS old (no write takes that long: the pid is a reused one)', async () => {
    const { root } = await makeCache();
    const stale = join(root, 'blobs', `.tmp-${process.ppid}-aaaaaaaaaaaaaaaa.bin`);
    const young = join(root, 'blobs', `.tmp-${process.ppid}-bbbbbbbbbbbbbbbb.bin`);
    await writeFile(stale, Buffer.alloc(10));
    await writeFile(young, Buffer.alloc(10));
    const oldSeconds = (Date.now() - TEMP_FILE_MAX_AGE_MS - 60_000) / 1000;
    await utimes(stale, oldSeconds, oldSeconds);
    const store = await openCacheStore(root);
    expect((await store.gc()).tempFiles).toEqual([`blobs/.tmp-${process.ppid}-aaaaaaaaaaaaaaaa.bin`]);
    expect((await readdir(join(root, 'blobs'))).filter((name) => name.startsWith('.tmp-'))).toEqual([`.tmp-${process.ppid}-bbbbbbbbbbbbbbbb.bin`]);
    await store.close();
  });

  it('an add racing gc still commits a complete blob', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const tensors = Array.from({ length: 30 }, (_, i) => makeTensor([128], 9500 + i));
    const [, results] = await Promise.all([store.gc(), store.addEntries(tensors.map((t, i) => toInput(t, `t${i}`))), store.gc()]);
    expect(results.every((r) => r.added)).toBe(true);
    await store.gc();
    expect((await store.verify({ decode: true })).ok).toBe(true);
    await store.close();
  });
});

describe('file system errors name the cache file and keep their errno', () => {
  it('a journal that cannot be written: IO_ERROR with the journal path (was a bare Node error); one that is not a regular file: JOURNAL_INVALID', async () => {
    const { FsBackend } = await import('../src/fs-backend.js');
    const root = await makeTempDir();
    const backend = new FsBackend(root);
    await backend.createJournal(1, new Uint8Array(16));
    const path = join(root, 'journal.1');
    const journal = (await backend.openJournal(1))!;
    try {
      await unlink(path); // the writer opens the path only when it first appends
      const appended = await catchError(() => journal.append(16, new Uint8Array(16)));
      expect(appended).toMatchObject({ code: 'IO_ERROR', path, details: { errno: 'ENOENT' } });
      expect(appended.message).toContain('cannot open the journal for writing [ENOENT]');
    } finally {
      await journal.close();
    }
    // A device (writes would fail with ENOSPC) or a directory is refused when opened, naming it.
    await symlink('/dev/full', path);
    expect(await catchError(() => backend.openJournal(1))).toMatchObject({ code: 'JOURNAL_INVALID', path, details: { reason: 'not-a-file' } });
    const dir = join(root, 'journal.2');
    await mkdir(dir);
    expect(await catchError(() => backend.openJournal(2))).toMatchObject({ code: 'JOURNAL_INVALID', path: dir, details: { reason: 'not-a-file' } });
  });

  it('cache directories that cannot be made: the real cause, not ENOENT', async () => {
    const { FsBackend } = await import('../src/fs-backend.js');
    const root = await makeTempDir();
    await writeFile(join(root, 'blobs'), 'a file where the blobs directory goes');
    expect(await catchError(() => new FsBackend(root).ensureLayout())).toMatchObject({ code: 'IO_ERROR', path: join(root, 'blobs'), details: { errno: 'ENOTDIR' } });
    await writeFile(join(root, 'plain'), '');
    expect(await catchError(() => new FsBackend(join(root, 'plain', 'cache')).ensureLayout())).toMatchObject({ code: 'IO_ERROR', details: { errno: 'ENOTDIR' } });
    // A missing parent is still made, and an existing layout is fine.
    const nested = join(root, 'a', 'b', 'cache');
    await new FsBackend(nested).ensureLayout();
    await new FsBackend(nested).ensureLayout();
    expect(existsSync(join(nested, 'blobs'))).toBe(true);
  });
});
