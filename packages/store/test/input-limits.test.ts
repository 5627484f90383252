// Inputs that claim sizes the store must not act on blindly: journal tails and blobs above what one
// read can carry, and other files that are not what their names say. Big files here are sparse.
import { crc32 } from 'node:zlib';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rm, stat, symlink, truncate, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { computePayloadLayout } from '@splitzip/codec';
import { signManifestText, writeSignedManifest } from '@splitzip/test-support/manifest';
import { afterEach, describe, expect, it } from 'vitest';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import type { JournalFile } from '../src/backend.js';
import { findDuplicateJsonKey } from '@splitzip/safetensors';
import { readFully, readFullySync, writeFully } from '../src/io-pieces.js';
import { JOURNAL_READ_WINDOW_BYTES, MAX_BLOB_BYTES, MAX_IO_PIECE_BYTES, MAX_JOURNAL_BYTES, MAX_LOCK_FILE_BYTES, MAX_PID } from '../src/limits.js';
import { openCacheStore } from '../src/index.js';
import { catchError, frameJournalRecord, makeCache, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

const packr = new Packr({ useRecords: false });
const frame = frameJournalRecord;

/** Loads the cache at `root` through a backend that records the length of every journal read. */
async function loadRecordingReads(root: string): Promise<{ store: FsCacheStore; reads: number[] }> {
  const reads: number[] = [];
  class RecordingBackend extends FsBackend {
    override async openJournal(generation: number): Promise<JournalFile | undefined> {
      const journal = await super.openJournal(generation);
      if (!journal) return journal;
      const read = journal.read.bind(journal);
      journal.read = (offsetBytes, lengthBytes) => {
        reads.push(lengthBytes);
        return read(offsetBytes, lengthBytes);
      };
      return journal;
    }
  }
  const store = await FsCacheStore.load(new RecordingBackend(root), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false });
  return { store, reads };
}

describe('journal replay reads in bounded windows', () => {
  it('a zero tail of MAX_JOURNAL_BYTES opens without reading it whole (was one read of the whole tail: 1 GiB of memory, a crash at 2 GiB)', async () => {
    const { root, tensors } = await makeCache();
    const path = join(root, 'journal.2');
    await writeFile(path, Buffer.concat([await readFile(path), frame([[2, tensors[0]!.key, 'before-tail', 240, 240]])]));
    await truncate(path, 16 + MAX_JOURNAL_BYTES); // sparse: a torn tail of zeros after the record
    const { store, reads } = await loadRecordingReads(root);
    expect(store.lookupBySlice('before-tail', 240, 240)?.key).toBe(tensors[0]!.key);
    expect(Math.max(...reads)).toBeLessThanOrEqual(JOURNAL_READ_WINDOW_BYTES);
    await store.close();
  });

  it('SIZE_INVALID, not a crash, when an open handle refreshes over a tail of 2 GiB', async () => {
    const { root } = await makeCache();
    const store = await openCacheStore(root, { compactOnClose: false });
    await truncate(join(root, 'journal.2'), 16 + 2 ** 31);
    const error = await catchError(() => store.refresh());
    expect(error.code).toBe('SIZE_INVALID');
    expect(error.details).toMatchObject({ limit: MAX_JOURNAL_BYTES });
    await store.close();
  });

  it('records cut by a window, and a record larger than the window, are read whole and applied in order', async () => {
    const { root, tensors } = await makeCache(2);
    const [a, b] = [tensors[0]!.key, tensors[1]!.key];
    const small = Array.from({ length: 40 }, (_, i) => frame([[2, a, `small-${i}`, 0, 240]]));
    // One record above the window: the same binding repeated (each a no-op after the first).
    const repeat = [2, b, 'big', 0, 240];
    const big = frame(Array.from({ length: Math.ceil((JOURNAL_READ_WINDOW_BYTES * 1.5) / packr.pack(repeat).length) }, () => repeat));
    expect(big.length).toBeGreaterThan(JOURNAL_READ_WINDOW_BYTES);
    // A filler record so the window boundary falls inside `big`, then a last record after it.
    const filler = frame([[2, a, 'x'.repeat(3000), 0, 240]]);
    const path = join(root, 'journal.2');
    await writeFile(path, Buffer.concat([await readFile(path), filler, ...small, big, frame([[3, b, 'small-0', 0, 240]]), frame([[2, a, 'last', 0, 240]])]));
    const { store, reads } = await loadRecordingReads(root);
    expect(store.lookupBySlice('big', 0, 240)?.key).toBe(b);
    expect(store.lookupBySlice('small-39', 0, 240)?.key).toBe(a);
    expect(store.lookupBySlice('small-0', 0, 240)?.key).toBe(b);
    expect(store.lookupBySlice('last', 0, 240)?.key).toBe(a);
    expect(reads.filter((n) => n > 16).length).toBeGreaterThan(1);
    expect(Math.max(...reads)).toBeLessThanOrEqual(big.length);
    await store.close();
    // A torn copy of the big record at the end is ignored, and the next writer cuts it.
    await writeFile(path, Buffer.concat([await readFile(path), big.subarray(0, big.length - 1)]));
    const again = await openCacheStore(root);
    expect(again.lookupBySlice('last', 0, 240)?.key).toBe(a);
    expect(await again.aliasSlice(a, 'after-torn', 0, 240)).toBe(true);
    await again.close();
    const reopened = await openCacheStore(root);
    expect(reopened.lookupBySlice('after-torn', 0, 240)?.key).toBe(a);
    await reopened.close();
  });
});

describe('a FIFO in place of a cache file is a typed error, never a hang', () => {
  /** Makes `path` a FIFO; the returned function unblocks any thread stuck opening it (the code before the fix) and removes it. */
  function plantFifo(path: string): () => Promise<void> {
    rmSync(path, { force: true });
    execFileSync('mkfifo', [path]);
    return async () => {
      // O_RDWR never blocks on a FIFO, and its open lets a blocked open(O_RDONLY) return.
      const fd = openSync(path, constants.O_RDWR | constants.O_NONBLOCK);
      await new Promise((resolve) => setTimeout(resolve, 100));
      closeSync(fd);
      await rm(path, { force: true });
    };
  }
  /** `promise`, or a HANG error after `ms`. */
  function within<T>(promise: Promise<T>, ms = 3000): Promise<T> {
    return Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(Object.assign(new Error('hang'), { code: 'HANG' })), ms).unref())]);
  }

  it('manifest.json: MANIFEST_INVALID; journal.<G>: JOURNAL_INVALID; lock: IO_ERROR naming it (each hung for good before)', async () => {
    const { root, tensors } = await makeCache();
    let unplant = plantFifo(join(root, 'manifest.json'));
    try {
      const error = await catchError(() => within(openCacheStore(root)));
      expect(error.code).toBe('MANIFEST_INVALID');
      expect(error.details).toMatchObject({ reason: 'not-a-file' });
    } finally {
      await unplant();
    }
    const { root: root2 } = await makeCache();
    unplant = plantFifo(join(root2, 'journal.2'));
    try {
      const error = await catchError(() => within(openCacheStore(root2)));
      expect(error.code).toBe('JOURNAL_INVALID');
      expect(error.path).toBe(join(root2, 'journal.2'));
    } finally {
      await unplant();
    }
    const { root: root3 } = await makeCache();
    const store = await openCacheStore(root3, { lockTimeoutMs: 1000, compactOnClose: false });
    unplant = plantFifo(join(root3, 'lock'));
    try {
      const error = await catchError(() => within(store.aliasSlice(tensors[0]!.key, 'blocked', 0, 240)));
      expect(error.code).toBe('IO_ERROR');
      expect(error.path).toBe(join(root3, 'lock'));
      expect(error.details).toMatchObject({ reason: 'not-a-file' });
    } finally {
      await unplant();
    }
    expect(await store.aliasSlice(tensors[0]!.key, 'unblocked', 0, 240)).toBe(true);
    await store.close();
  });
});

describe('lock files are input', () => {
  const old = new Date(Date.now() - 60_000);
  async function writeLock(root: string, holder: Record<string, unknown>): Promise<void> {
    await writeFile(join(root, 'lock'), JSON.stringify({ host: hostname(), bootId: null, startTicks: null, token: '0123456789abcdef', createdMs: Date.now(), ...holder }));
  }

  it('a pid above MAX_PID makes the record unparseable: broken once old (was never judged dead: LOCK_TIMEOUT for every writer, forever)', async () => {
    const { root, tensors } = await makeCache();
    const store = await openCacheStore(root, { lockTimeoutMs: 300, compactOnClose: false });
    for (const pid of [2 ** 31, 2 ** 40, MAX_PID + 1]) {
      await writeLock(root, { pid });
      expect((await catchError(() => store.aliasSlice(tensors[0]!.key, `pid-${pid}`, 0, 240))).code).toBe('LOCK_TIMEOUT');
      await utimes(join(root, 'lock'), old, old);
      expect(await store.aliasSlice(tensors[0]!.key, `pid-${pid}`, 0, 240)).toBe(true);
    }
    await store.close();
  });

  it('a lock file above MAX_LOCK_FILE_BYTES is not read whole: unparseable, broken once old (a 1.1 GiB one was read whole, then IO_ERROR every time)', async () => {
    const { root, tensors } = await makeCache();
    const store = await openCacheStore(root, { lockTimeoutMs: 300, compactOnClose: false });
    await writeLock(root, { pid: process.pid });
    await truncate(join(root, 'lock'), Math.round(1.1 * 2 ** 30)); // sparse
    expect((await catchError(() => store.aliasSlice(tensors[0]!.key, 'big-lock', 0, 240))).code).toBe('LOCK_TIMEOUT');
    await utimes(join(root, 'lock'), old, old);
    expect(await store.aliasSlice(tensors[0]!.key, 'big-lock', 0, 240)).toBe(true);
    // Just above the limit: the same (a valid record padded with spaces is still not read).
    await writeFile(join(root, 'lock'), JSON.stringify({ pid: 1, host: 'x', token: '0123456789abcdef', createdMs: 0 }).padEnd(MAX_LOCK_FILE_BYTES + 1, ' '));
    await utimes(join(root, 'lock'), old, old);
    expect(await store.aliasSlice(tensors[0]!.key, 'padded-lock', 0, 240)).toBe(true);
    await store.close();
  });
});

describe('gc({ dryRun: true }) changes nothing on disk', () => {
  /** Every file's name, size, modification time and bytes, to compare before and after. */
  async function snapshot(root: string): Promise<string[]> {
    const out: string[] = [];
    for (const dir of ['', 'blobs']) {
      for (const name of (await readdir(join(root, dir))).sort()) {
        if (dir === '' && name === 'blobs') continue;
        const path = join(root, dir, name);
        const info = await stat(path);
        out.push(`${dir}/${name} ${info.size} ${info.mtimeMs} ${createHash('sha256').update(await readFile(path)).digest('hex')}`);
      }
    }
    return out;
  }

  it('an interrupted compaction is reported, not finished, and no dead lock is recovered (a dry run rewrote manifest.json and deleted the journal, reporting 0 old journals)', async () => {
    const root = await makeTempDir();
    await (await openCacheStore(root, { create: true })).close();
    // A writer whose compaction fails after its seal (a full disk at the manifest write), then dies.
    class FullDisk extends FsBackend {
      override writeManifest(): Promise<void> {
        return Promise.reject(new Error('ENOSPC'));
      }
    }
    const writer = await FsCacheStore.load(new FullDisk(root), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false });
    const t = makeTensor([40, 3], 7100);
    await writer.addEntry(toInput(t, 'folded', [['shard', 0, 240]]));
    await expect(writer.compact()).rejects.toThrow();
    await writer.close();
    await writeFile(join(root, 'lock'), JSON.stringify({ pid: MAX_PID, host: hostname(), bootId: null, startTicks: null, token: 'aaaaaaaaaaaaaaaa', createdMs: 0 }));
    await writeFile(join(root, 'blobs', `${'d'.repeat(40)}.bin`), Buffer.alloc(64));
    expect(JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')).generation).toBe(1);

    const store = await openCacheStore(root, { compactOnClose: false });
    expect(store.getEntry(t.key)?.qualname).toBe('folded');
    const before = await snapshot(root);
    const dry = await store.gc({ dryRun: true });
    expect(await snapshot(root)).toEqual(before);
    expect(dry).toMatchObject({ dryRun: true, finishedCompaction: 'journal.1', oldJournals: ['journal.1'], staleLocks: ['lock'], orphanBlobs: [`blobs/${'d'.repeat(40)}.bin`] });
    expect(store.generation).toBe(1);

    const report = await store.gc();
    expect(report).toMatchObject({ dryRun: false, finishedCompaction: 'journal.1', oldJournals: ['journal.1'], staleLocks: ['lock'], orphanBlobs: [`blobs/${'d'.repeat(40)}.bin`] });
    expect(store.generation).toBe(2);
    expect((await readdir(root)).sort()).toEqual(['blobs', 'journal.2', 'manifest.json']);
    expect(await store.gc({ dryRun: true })).toMatchObject({ oldJournals: [], staleLocks: [], orphanBlobs: [] });
    expect((await store.gc({ dryRun: true })).finishedCompaction).toBeUndefined();
    await store.close();
  });
});

describe('deeply nested values are typed errors with short messages (was RangeError: Maximum call stack size exceeded)', () => {
  const deep = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
  const cases: [string, string, (m: Record<string, any>, e: Record<string, any>) => void][] = [ // eslint-disable-line @typescript-eslint/no-explicit-any
    ['SIZE_INVALID', 'meta.element_count', (_m, e) => (e.meta.element_count = '@DEEP@')],
    ['ENTRY_INVALID', 'dtype', (_m, e) => (e.dtype = '@DEEP@')],
    ['UNSUPPORTED_PAYLOAD_VERSION', 'format_version', (_m, e) => (e.format_version = '@DEEP@')],
    ['UNSUPPORTED_PAYLOAD_VERSION', 'meta.version', (_m, e) => (e.meta.version = '@DEEP@')],
    ['UNSUPPORTED_FORMAT', 'format', (m) => (m.format = '@DEEP@')],
    ['MANIFEST_INVALID', 'generation', (m) => (m.generation = '@DEEP@')],
    ['ENTRY_INVALID', 'a long dtype string', (_m, e) => (e.dtype = 'x'.repeat(1_000_000))],
  ];
  for (const [code, what, edit] of cases) {
    it(`manifest ${what}: ${code}`, async () => {
      const { root } = await makeCache();
      const path = join(root, 'manifest.json');
      const manifest = JSON.parse(await readFile(path, 'utf8'));
      edit(manifest, Object.values(manifest.entries)[0] as Record<string, unknown>);
      const { body_crc32: _dropped, ...rest } = manifest;
      await writeFile(path, signManifestText(JSON.stringify(rest).replace('"@DEEP@"', deep(100_000))));
      const error = await catchError(() => openCacheStore(root));
      // An entry's own failure is the manifest's damage (recoverDamagedManifest), its code kept in details.
      if (['SIZE_INVALID', 'ENTRY_INVALID', 'UNSUPPORTED_PAYLOAD_VERSION'].includes(code)) {
        expect(error.code).toBe('MANIFEST_INVALID');
        expect(error.details?.entryCode).toBe(code);
      } else {
        expect(error.code).toBe(code);
      }
      expect(error.message.length).toBeLessThan(600);
      expect(JSON.stringify(error.details).length).toBeLessThan(600);
    });
  }

  it('a journal record (valid CRC) whose entry has a dtype nested 4000 deep: ENTRY_INVALID, as damage at its offset (JOURNAL_INVALID, opCode)', async () => {
    const { root, tensors } = await makeCache();
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8'));
    const key = 'd'.repeat(40);
    const entry = { ...(manifest.entries[tensors[0]!.key] as Record<string, unknown>), blob: `blobs/${key}.bin`, dtype: 'MARK', slice_keys: [] };
    const packed = packr.pack([[1, key, entry]]);
    const at = packed.indexOf(packr.pack('MARK'));
    const nested = Buffer.concat([Buffer.alloc(4000, 0x91), Buffer.from([0x90])]); // [[[…[]…]]] in MessagePack
    const body = Buffer.concat([packed.subarray(0, at), nested, packed.subarray(at + packr.pack('MARK').length)]);
    const head = Buffer.alloc(12);
    head.writeUInt32LE(0x524a5a53, 0);
    head.writeUInt32LE(body.length, 4);
    head.writeUInt32LE(crc32(body, crc32(head.subarray(4, 8))) >>> 0, 8);
    const path = join(root, 'journal.2');
    await writeFile(path, Buffer.concat([await readFile(path), head, body]));
    // Opens (readers go on with what comes before it); writers refuse, naming the entry's error.
    const store = await openCacheStore(root);
    try {
      const error = await catchError(() => store.gc());
      expect(error.code).toBe('JOURNAL_INVALID');
      expect(error.details?.opCode).toBe('ENTRY_INVALID');
      expect(error.message).toContain('an array of 1 item');
      expect(error.message.length).toBeLessThan(800);
    } finally {
      await store.close();
    }
  });
});

describe('verify looks at the blob file before it sizes a buffer', () => {
  /** Adds a valid manifest entry of `n` BF16 values (all escapes at chunk size 64: the largest payload) under `key`, with no blob. */
  async function addPhantom(root: string, key: string, n: number): Promise<number> {
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8'));
    const entry = structuredClone(Object.values(manifest.entries)[0]) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const compBytes = computePayloadLayout(n, n, 64).totalBytes;
    Object.assign(entry, { blob: `blobs/${key}.bin`, raw_bytes: 2 * n, shape: [n], comp_bytes: compBytes, slice_keys: [] });
    Object.assign(entry.meta, { element_count: n, chunk_size: 64, chunk_count: Math.ceil(n / 64), escape_count: n, comp_bytes: compBytes, raw_bytes: 2 * n });
    manifest.entries[key] = entry;
    await writeSignedManifest(join(root, 'manifest.json'), manifest);
    return compBytes;
  }

  it('an entry claiming MAX_BLOB_BYTES: BLOB_MISSING without its blob, BLOB_SIZE_MISMATCH with a short one, SIZE_INVALID above MAX_BUFFER_BYTES (was IO_ERROR: Invalid typed array length)', async () => {
    const { root, tensors } = await makeCache();
    const key = 'b'.repeat(40);
    const compBytes = await addPhantom(root, key, 2 ** 32 - 1);
    expect(compBytes).toBe(MAX_BLOB_BYTES);
    const store = await openCacheStore(root);
    const problemsOf = async (decode: boolean) => (await store.verify({ decode })).problems.map((p) => [p.key, p.code]);
    expect(await problemsOf(true)).toEqual([[key, 'BLOB_MISSING']]);
    const blob = join(root, 'blobs', `${key}.bin`);
    await writeFile(blob, Buffer.alloc(64));
    expect(await problemsOf(false)).toEqual([[key, 'BLOB_SIZE_MISMATCH']]);
    await truncate(blob, compBytes); // sparse
    const report = await store.verify({ decode: true });
    expect(report.problems.map((p) => [p.key, p.code])).toEqual([[key, 'SIZE_INVALID']]);
    expect(report.problems[0]!.message).toContain('MAX_BUFFER_BYTES');
    expect(report.passed).toBe(1);
    expect(store.getEntry(tensors[0]!.key)).toBeDefined();
    await store.close();
  });
});

describe('gc and files that are not regular files', () => {
  it('a directory named like an orphan blob, a dead temp file or an old journal is reported unknown and kept (every gc failed with IO_ERROR [ERR_FS_EISDIR])', async () => {
    const { root } = await makeCache();
    const names = [`blobs/${'e'.repeat(40)}.bin`, `blobs/.tmp-${MAX_PID + 1}-0123456789abcdef.bin`, 'journal.9', 'lock.break-0123456789abcdef'];
    for (const name of names) await mkdir(join(root, name));
    await symlink('/etc/hostname', join(root, 'blobs', `${'f'.repeat(40)}.bin`));
    const store = await openCacheStore(root);
    for (const dryRun of [true, false]) {
      const report = await store.gc({ dryRun });
      expect(report.unknownFiles.sort()).toEqual([...names, `blobs/${'f'.repeat(40)}.bin`].sort());
      expect(report).toMatchObject({ orphanBlobs: [], tempFiles: [], oldJournals: [], staleLocks: [] });
    }
    for (const name of names) expect((await stat(join(root, name))).isDirectory()).toBe(true);
    expect((await lstat(join(root, 'blobs', `${'f'.repeat(40)}.bin`))).isSymbolicLink()).toBe(true);
    await store.close();
  });
});

describe('a manifest key given twice is MANIFEST_INVALID naming it (JSON.parse kept the last: a second "entries": {} opened an empty cache)', () => {
  it('findDuplicateJsonKey: any object, escapes, keys inside strings, deep nesting', () => {
    expect(findDuplicateJsonKey('{"a":1,"b":{"c":[{"d":1,"d":2}]}}')).toMatchObject({ key: 'd', path: ['b', 'c', '[]'] });
    expect(findDuplicateJsonKey('{"entries":{},"entr\\\\u0069es":{}}')).toBeUndefined();
    expect(findDuplicateJsonKey('{"entries":{},"entr\\u0069es":{}}')).toMatchObject({ key: 'entries', path: [] });
    expect(findDuplicateJsonKey('{"a":"\\\\\\"a\\":{","b":["a","a"],"c":{"a":1}}')).toBeUndefined();
    expect(findDuplicateJsonKey(`{"x":${'['.repeat(100_000)}${']'.repeat(100_000)},"x":1}`)).toMatchObject({ key: 'x' });
    const many = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, { v: i }]));
    expect(findDuplicateJsonKey(JSON.stringify(many))).toBeUndefined();
    expect(findDuplicateJsonKey(`${JSON.stringify(many).slice(0, -1)},"k999":0}`)).toMatchObject({ key: 'k999', path: [] });
  });

  it('a second "entries", a tensor key given twice, a field given twice in an entry', async () => {
    const { root, tensors } = await makeCache(2);
    const path = join(root, 'manifest.json');
    const text = await readFile(path, 'utf8');
    const key = tensors[1]!.key;
    const cases: [string, string, string[]][] = [
      [text.replace(/}\s*$/, ',"entries":{}}'), 'entries', []],
      [text.replace(`"${key}":`, `"${key}":{},"${key}":`), key, ['entries']],
      [text.replace(`"${key}":{`, `"${key}":{"dtype":"F16",`), 'dtype', ['entries', key]],
    ];
    for (const [edited, duplicate, keyPath] of cases) {
      JSON.parse(edited); // valid JSON all the same
      await writeFile(path, edited);
      const error = await catchError(() => openCacheStore(root));
      expect(error.code).toBe('MANIFEST_INVALID');
      expect(error.message).toContain(`repeats the key "${duplicate}"`);
      expect(error.details).toMatchObject({ key: duplicate, keyPath });
    }
    await writeFile(path, text);
    const store = await openCacheStore(root);
    expect(store.size).toBe(2);
    await store.close();
  });
});

describe('reads and writes in pieces (Node refuses one call above 2 GiB)', () => {
  it('a valid blob of 2-4 GiB is read (sparse here: its zero header is BLOB_CORRUPT; was IO_ERROR ERR_OUT_OF_RANGE, never readable)', async () => {
    const { root } = await makeCache();
    const n = 1_450_000_000;
    const key = 'c'.repeat(40);
    const compBytes = computePayloadLayout(n, 0, 1024).totalBytes;
    expect(compBytes).toBeGreaterThan(2 ** 31);
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8'));
    const entry = structuredClone(Object.values(manifest.entries)[0]) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    Object.assign(entry, { blob: `blobs/${key}.bin`, raw_bytes: 2 * n, shape: [n], comp_bytes: compBytes, slice_keys: [] });
    Object.assign(entry.meta, { element_count: n, chunk_size: 1024, chunk_count: Math.ceil(n / 1024), escape_count: 0, comp_bytes: compBytes, raw_bytes: 2 * n });
    manifest.entries[key] = entry;
    await writeSignedManifest(join(root, 'manifest.json'), manifest);
    await writeFile(join(root, entry.blob), '');
    await truncate(join(root, entry.blob), compBytes);
    const store = await openCacheStore(root);
    const slot = new Uint8Array(compBytes);
    expect((await catchError(() => store.readBlob(key, slot))).code).toBe('BLOB_CORRUPT');
    expect((await catchError(() => store.readBlobSync!(key, slot))).code).toBe('BLOB_CORRUPT');
    await store.close();
  });

  /** A file of `bytes` as positioned reads that, like Node, refuse a length above `limit`. */
  function fakeFile(bytes: Uint8Array, limit: number) {
    const lengths: number[] = [];
    const readSync = (target: Uint8Array, offset: number, length: number, position: number): number => {
      if (length > limit) throw new RangeError(`length ${length} is above ${limit}`);
      lengths.push(length);
      const n = Math.max(0, Math.min(length, bytes.length - position));
      target.set(bytes.subarray(position, position + n), offset);
      return n;
    };
    return { lengths, readSync, read: (target: Uint8Array, offset: number, length: number, position: number) => Promise.resolve(readSync(target, offset, length, position)) };
  }

  it('readFully / readFullySync / writeFully never ask for more than the piece size, and stop at the end of the file', async () => {
    expect(MAX_IO_PIECE_BYTES).toBeLessThan(2 ** 31);
    const data = Uint8Array.from({ length: 1000 }, (_, i) => i & 0xff);
    const file = fakeFile(data, 64);
    const target = new Uint8Array(900);
    expect(await readFully(file.read, target, 50, 64)).toBe(900);
    expect(target).toEqual(data.subarray(50, 950));
    expect(Math.max(...file.lengths)).toBe(64);
    const tail = new Uint8Array(300);
    expect(readFullySync(file.readSync, tail, 800, 64)).toBe(200);
    expect(tail.subarray(0, 200)).toEqual(data.subarray(800));
    const written: [number, number | null][] = [];
    await writeFully(async (_source, _offset, length, position) => {
      if (length > 64) throw new RangeError('too long');
      written.push([length, position]);
      return Math.min(length, 40); // short writes too
    }, data, 10, 64);
    expect(written.reduce((n, [length]) => n + Math.min(length, 40), 0)).toBe(1000);
    expect(written[1]).toEqual([64, 50]);
  });
});
