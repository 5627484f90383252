// verify read each blob whole: a 4 GiB tensor's ~3 GiB payload was held at once to check its
// checksum. A large version-3 payload is now read a segment at a time (at most
// VERIFY_READ_PIECE_BYTES a read), and every kind of damage gets the verdict the whole read gives.
import { convertPayloadVersion, createXxh32Stream, readPayloadMeta, xxh32 } from '@splitzip/codec';
import { rm, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { BlobRangeReader, VerifyBackend } from '../src/blob-range-reader.js';
import { openCacheStore, type CacheEntry, type CacheStore } from '../src/index.js';
import { VERIFY_READ_PIECE_BYTES } from '../src/limits.js';
import { verifyEntries } from '../src/verify-entries.js';
import { VERIFY_DECODE_BLOCK_BYTES } from '../src/hash-decoded-blocks.js';
import { makeTempDir, removeTempDirs, toInput } from './helpers.js';
import { makeBlockTensor, resignPayload } from './verify-decode-blocks.js';


/** Three checksum segments (2^20 values each), the last of 3 values. */
const N = 2 ** 21 + 3;
const SEGMENT = 2 ** 20;

/** What a backend serving these payloads saw: whole reads, and the largest ranged read. */
interface Reads {
  whole: number;
  opened: number;
  largest: number;
}

/** Serves `payloads` by key, whole and (with `ranges`) in ranges, recording the reads. */
function recordingBackend(payloads: ReadonlyMap<string, Uint8Array>, reads: Reads, ranges: boolean): VerifyBackend {
  const backend: VerifyBackend = {
    readBlobInto: async (key, _blob, target) => {
      reads.whole++;
      target.set(payloads.get(key)!.subarray(0, target.length));
    },
  };
  if (ranges) {
    backend.openBlobRanges = async (key): Promise<BlobRangeReader> => {
      reads.opened++;
      const payload = payloads.get(key)!;
      return {
        read: async (target, position) => {
          reads.largest = Math.max(reads.largest, target.length);
          target.set(payload.subarray(position, position + target.length));
        },
        close: async () => undefined,
      };
    };
  }
  return backend;
}

/** verify's problems for `entries` over `payloads`, read whole and in pieces: both, with what the piecewise reads were. */
async function verifyBoth(entries: CacheEntry[], payloads: ReadonlyMap<string, Uint8Array>, decode: boolean) {
  const wholeReads: Reads = { whole: 0, opened: 0, largest: 0 };
  const pieceReads: Reads = { whole: 0, opened: 0, largest: 0 };
  const whole = await verifyEntries(recordingBackend(payloads, wholeReads, false), entries, 0, { decode }, VERIFY_DECODE_BLOCK_BYTES, 0);
  const pieces = await verifyEntries(recordingBackend(payloads, pieceReads, true), entries, 0, { decode }, VERIFY_DECODE_BLOCK_BYTES, 0);
  return { whole, pieces, pieceReads };
}

let opened: CacheStore | undefined;
/** A store of two multi-segment tensors: escapes near segment and block edges, and one mostly escapes (escape sections of MiBs). */
async function fixture() {
  const root = await makeTempDir();
  const store = await openCacheStore(root, { create: true, compactOnClose: false });
  opened = store;
  const t = makeBlockTensor(N, [SEGMENT, 2 ** 19], 7);
  const heavy = makeBlockTensor(N, [4], 8, 64);
  await store.addEntries([toInput(t, 't'), toInput(heavy, 'heavy')]);
  return { store, root, t, heavy };
}

afterEach(async () => {
  await opened?.close();
  opened = undefined;
  await removeTempDirs();
});

/** A copy of `payload` with byte `at` flipped. */
function flip(payload: Uint8Array, at: number): Uint8Array {
  const copy = payload.slice();
  copy[at] = copy[at]! ^ 0x5a;
  return copy;
}

describe('verify of a multi-segment payload read in pieces', () => {
  it('checks an intact payload, decoded or not, in reads of at most VERIFY_READ_PIECE_BYTES, never reading it whole', async () => {
    const { store, t, heavy } = await fixture();
    const entries = [store.getEntry(t.key)!, store.getEntry(heavy.key)!];
    // The escape sections of `heavy` span several pieces.
    const layout = readPayloadMeta(heavy.payload).layout;
    expect(layout.totalBytes - layout.escapeIndex.offsetBytes).toBeGreaterThan(3 * VERIFY_READ_PIECE_BYTES);
    for (const decode of [false, true]) {
      const { pieces, pieceReads } = await verifyBoth(entries, new Map([[t.key, t.payload], [heavy.key, heavy.payload]]), decode);
      expect(pieces).toMatchObject({ ok: true, passed: 2, decoded: decode ? 2 : 0, bytesRead: t.payload.length + heavy.payload.length });
      expect(pieceReads.whole).toBe(0);
      expect(pieceReads.opened).toBe(2);
      expect(pieceReads.largest).toBeGreaterThan(0);
      expect(pieceReads.largest).toBeLessThanOrEqual(VERIFY_READ_PIECE_BYTES);
    }
  });

  it('reports each kind of damage with the code (and message) the whole read gives', async () => {
    const { store, t, heavy } = await fixture();
    const entry = store.getEntry(t.key)!;
    const heavyEntry = store.getEntry(heavy.key)!;
    const layout = readPayloadMeta(t.payload).layout;
    const heavyLayout = readPayloadMeta(heavy.payload).layout;
    const cases: [string, CacheEntry, Uint8Array, string][] = [
      ['sm byte of the middle segment', entry, flip(t.payload, layout.sm.offsetBytes + SEGMENT + 12345), 'BLOB_CORRUPT'],
      ['codes byte of the last segment', entry, flip(t.payload, layout.codes.offsetBytes + SEGMENT + 1), 'BLOB_CORRUPT'],
      ['padding after the last segment', entry, flip(t.payload, layout.escapeIndex.offsetBytes - 1), 'BLOB_CORRUPT'],
      ['a reserved header byte', entry, flip(t.payload, 150), 'BLOB_CORRUPT'],
      ['a codebook byte', entry, flip(t.payload, 41), 'BLOB_CORRUPT'],
      ['the header total_bytes', entry, flip(t.payload, 136), 'BLOB_CORRUPT'],
      ['the stored checksum', entry, flip(t.payload, 253), 'BLOB_CORRUPT'],
      ['the escape index', entry, flip(t.payload, layout.escapeIndex.offsetBytes + 40), 'BLOB_CORRUPT'],
      ['an escape position', entry, flip(t.payload, layout.escapePositions.offsetBytes + 6), 'BLOB_CORRUPT'],
      ['an escape exponent 1.25 MiB into its section', heavyEntry, flip(heavy.payload, heavyLayout.escapeExponents.offsetBytes + 1.25 * 2 ** 20 + 5), 'BLOB_CORRUPT'],
      ['the escape positions of a heavy payload', heavyEntry, flip(heavy.payload, heavyLayout.escapePositions.offsetBytes + 2.5 * 2 ** 20 + 2), 'BLOB_CORRUPT'],
      // A valid checksum over other bytes: only the blob's SHA-256 tells.
      ['a re-signed sm byte', ...signed(entry, resignPayload(flip(t.payload, layout.sm.offsetBytes + 2 * SEGMENT + 1))), 'BLOB_CORRUPT'],
      // The manifest and the blob disagree: an intact payload of another tensor.
      ['a manifest checksum of another payload', { ...entry, meta: { ...entry.meta, checksum: entry.meta.checksum ^ 1 } }, t.payload, 'META_MISMATCH'],
    ];
    for (const [what, e, payload, code] of cases) {
      for (const decode of [false, true]) {
        const { whole, pieces, pieceReads } = await verifyBoth([e], new Map([[e.key, payload]]), decode);
        expect(whole.problems.map((p) => p.code), what).toEqual([code]);
        expect(pieces.problems, `${what}, decode ${decode}`).toEqual(whole.problems);
        expect(pieceReads).toMatchObject({ whole: 0, opened: 1 });
        expect(pieceReads.largest).toBeLessThanOrEqual(VERIFY_READ_PIECE_BYTES);
      }
    }
  });

  it('a payload that breaks a decoding rule under a valid checksum, and a decoded tensor that is not the entry, are found as the whole read finds them', async () => {
    const { store, t } = await fixture();
    const entry = store.getEntry(t.key)!;
    const layout = readPayloadMeta(t.payload).layout;
    // Without a blob SHA-256, so that the decode is what finds them.
    const bare: CacheEntry = { ...entry, blobSha256: null };
    const cases: [string, CacheEntry, Uint8Array, string][] = [
      // Code 15 (the codebook has 4 entries) in the middle segment.
      ['an invalid code', ...signed(bare, resignPayload(orByte(t.payload, layout.codes.offsetBytes + SEGMENT / 2 + 100, 0xff))), 'BLOB_CORRUPT'],
      ['an escape index that decreases', ...signed(bare, resignPayload(setU32(t.payload, layout.escapeIndex.offsetBytes + 4 * 1030, 0))), 'BLOB_CORRUPT'],
      ['an escape position out of its chunk', ...signed(bare, resignPayload(setU16(t.payload, layout.escapePositions.offsetBytes + 2 * 3, 0xffff))), 'BLOB_CORRUPT'],
      ['another content key', { ...entry, key: 'c'.repeat(40) }, t.payload, 'DIGEST_MISMATCH'],
      ['another original SHA-256', { ...entry, sha256: 'd'.repeat(64) }, t.payload, 'DIGEST_MISMATCH'],
    ];
    for (const [what, e, payload, code] of cases) {
      const { whole, pieces, pieceReads } = await verifyBoth([e], new Map([[e.key, payload]]), true);
      expect(whole.problems.map((p) => p.code), what).toEqual([code]);
      expect(pieces.problems.map((p) => p.code), what).toEqual([code]);
      expect(pieceReads).toMatchObject({ whole: 0, opened: 1 });
      if (code === 'BLOB_CORRUPT') expect(pieces.problems[0]!.message, what).toMatch(/^BLOB_CORRUPT: blob does not decode: /);
      if (code === 'DIGEST_MISMATCH') expect(pieces.problems, what).toEqual(whole.problems);
    }
  });

  it('a truncated or missing blob on disk is BLOB_SIZE_MISMATCH or BLOB_MISSING through the file-system backend', async () => {
    const { store, root, t } = await fixture();
    const backend = (store as unknown as { backend: VerifyBackend }).backend;
    const entry = store.getEntry(t.key)!;
    const path = join(root, entry.blob);
    const run = async (b: VerifyBackend) => (await verifyEntries(b, [entry], 0, { decode: true }, VERIFY_DECODE_BLOCK_BYTES, 0)).problems.map((p) => p.code);
    expect(await run(backend)).toEqual([]);
    await truncate(path, t.payload.length - 256);
    expect(await run(backend)).toEqual(['BLOB_SIZE_MISMATCH']);
    // Shrunk after the size was looked at: the open reader's own check.
    expect(await run({ readBlobInto: backend.readBlobInto.bind(backend), openBlobRanges: backend.openBlobRanges!.bind(backend) })).toEqual(['BLOB_SIZE_MISMATCH']);
    await writeFile(path, flip(t.payload, readPayloadMeta(t.payload).layout.sm.offsetBytes + 5));
    expect(await run(backend)).toEqual(['BLOB_CORRUPT']);
    await rm(path);
    expect(await run(backend)).toEqual(['BLOB_MISSING']);
    await writeFile(path, t.payload);
    expect(await run(backend)).toEqual([]);
  });

  it('a version-2 payload (no segments) is read whole, as before', async () => {
    const { store, t } = await fixture();
    const v2 = convertPayloadVersion(t.payload, 2);
    const entry = store.getEntry(t.key)!;
    const meta = readPayloadMeta(v2);
    const v2Entry: CacheEntry = { ...entry, blobSha256: null, formatVersion: 2, meta: { ...entry.meta, version: 2, checksum: meta.checksum } };
    const { whole, pieces, pieceReads } = await verifyBoth([v2Entry], new Map([[t.key, v2]]), true);
    expect(whole.ok).toBe(true);
    expect(pieces.ok).toBe(true);
    expect(pieceReads).toMatchObject({ whole: 1, opened: 0 });
  });
});

it("the codec's createXxh32Stream gives the XXH32 of the bytes whatever the pieces", () => {
  const bytes = new Uint8Array(1000);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff;
  for (const length of [0, 1, 15, 16, 17, 255, 256, 1000]) {
    for (const cut of [1, 5, 16, 33, 256]) {
      const stream = createXxh32Stream();
      for (let at = 0; at < length; at += cut) stream.update(bytes.subarray(at, Math.min(length, at + cut)));
      expect(stream.digest(), `${length} bytes in pieces of ${cut}`).toBe(xxh32(bytes.subarray(0, length)));
    }
  }
});

/** `entry` recording the checksum of a re-signed `payload` (as a writer that stored those bytes would), with it. */
function signed(entry: CacheEntry, payload: Uint8Array): [CacheEntry, Uint8Array] {
  return [{ ...entry, meta: { ...entry.meta, checksum: readPayloadMeta(payload).checksum } }, payload];
}

function orByte(payload: Uint8Array, at: number, bits: number): Uint8Array {
  const copy = payload.slice();
  copy[at] = copy[at]! | bits;
  return copy;
}

function setU32(payload: Uint8Array, at: number, value: number): Uint8Array {
  const copy = payload.slice();
  new DataView(copy.buffer).setUint32(at, value, true);
  return copy;
}

function setU16(payload: Uint8Array, at: number, value: number): Uint8Array {
  const copy = payload.slice();
  new DataView(copy.buffer).setUint16(at, value, true);
  return copy;
}
