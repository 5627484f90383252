// A payload that breaks a decoding rule under a valid checksum is reported by verify({ decode: true })
// as BLOB_CORRUPT with the whole decode's message, whatever the block size: blocks decoded one
// after another must not report another rule (a whole decode checks every chunk's escapes before
// any code). These pass on the whole-decode verify too: they pin what it reported.
import { describe, expect, it } from 'vitest';
import { encode, createCodebook, readPayloadMeta } from '@splitzip/codec';
import { openCacheStore } from '../src/index.js';
import { verifyEntries } from '../src/verify-entries.js';
import { makeTempDir } from './helpers.js';
import {
  CODEBOOK_EXPONENTS,
  entriesOf,
  makeBlockTensor,
  payloadBackend,
  readEscapeIndex,
  resignPayload,
  setCode,
  setEscapeIndex,
  setEscapePosition,
  wholeDecodeMessage,
  type BlockTensor,
} from './verify-decode-blocks.js';

/** Block sizes (values) tried beside the store's own: one value, odd, not a chunk, a chunk. */
const BLOCK_VALUES = [1, 3, 1000, 1024];

/**
 * Stores `payload` (edited from t's, re-signed) under t's key and expects one BLOB_CORRUPT problem
 * whose message is the whole decode's, from store.verify and from verifyEntries at every block size.
 */
async function expectDecodeProblem(t: BlockTensor, edit: (payload: Uint8Array) => void): Promise<string> {
  const payload = t.payload.slice();
  edit(payload);
  resignPayload(payload);
  const store = await openCacheStore(await makeTempDir(), { create: true });
  await store.addEntry({ key: t.key, qualname: 'edited', payload, shape: t.shape, dtype: 'BF16', sha256: t.sha256 });
  const message = `BLOB_CORRUPT: blob does not decode: ${wholeDecodeMessage(payload)} (entry ${t.key})`;
  const expected = [{ key: t.key, qualname: 'edited', code: 'BLOB_CORRUPT', message }];
  expect((await store.verify()).ok).toBe(true);
  expect((await store.verify({ decode: true })).problems).toEqual(expected);
  for (const block of BLOCK_VALUES) {
    const report = await verifyEntries(payloadBackend(new Map([[t.key, payload]])), entriesOf(store), 0, { decode: true }, 2 * block);
    expect(report.problems, `blocks of ${block}`).toEqual(expected);
    expect(report.decoded).toBe(0);
  }
  await store.close();
  return message;
}

/** The first escape of chunk c (its index entry), for a chunk that has escapes. */
function firstEscapeOf(payload: Uint8Array, c: number): number {
  const first = readEscapeIndex(payload, c);
  expect(readEscapeIndex(payload, c + 1)).toBeGreaterThan(first);
  return first;
}

describe('verify decode: failures found by decoding, reported as a whole decode reported them', () => {
  const n = 4097; // 5 chunks of 1024 (the last of 1 value), odd: a padding nibble
  const tensor = () => makeBlockTensor(n, [1000], 31);

  it('an invalid code', async () => {
    expect(await expectDecodeProblem(tensor(), (p) => setCode(p, 2500, CODEBOOK_EXPONENTS.length))).toMatch(/INVALID_CODE: value 2500 has code 4/);
  });

  it('two invalid codes in different blocks: the first', async () => {
    const message = await expectDecodeProblem(tensor(), (p) => {
      setCode(p, 3001, 15);
      setCode(p, 1500, 9);
    });
    expect(message).toMatch(/value 1500 has code 9/);
  });

  it('an invalid code before a bad escape position in a later chunk: the escape (a whole decode checks every escape first)', async () => {
    const message = await expectDecodeProblem(tensor(), (p) => {
      setCode(p, 10, 7);
      setEscapePosition(p, firstEscapeOf(p, 3), 1024);
    });
    expect(message).toMatch(/BAD_ESCAPE_POSITION: escape \d+ of chunk 3 is out of order or outside the chunk/);
  });

  it('an invalid code before an inconsistent escape index entry in a later chunk: the index', async () => {
    const message = await expectDecodeProblem(tensor(), (p) => {
      setCode(p, 5, 5);
      setEscapeIndex(p, 3, readEscapeIndex(p, 2) - 1);
    });
    expect(message).toMatch(/BAD_ESCAPE_INDEX: escape index of chunk 2 is inconsistent/);
  });

  it('escape positions out of order within a chunk', async () => {
    const message = await expectDecodeProblem(tensor(), (p) => {
      const j = firstEscapeOf(p, 2);
      setEscapePosition(p, j + 1, 0);
    });
    expect(message).toMatch(/BAD_ESCAPE_POSITION: escape \d+ of chunk 2/);
  });

  it('an escape index that does not end at escape_count', async () => {
    const message = await expectDecodeProblem(tensor(), (p) => setEscapeIndex(p, readPayloadMeta(p).chunkCount, readPayloadMeta(p).escapeCount - 1));
    expect(message).toMatch(/escape index must start at 0 and end at escape_count/);
  });

  it('a padding nibble that is not 0 after the last code (odd length)', async () => {
    const message = await expectDecodeProblem(tensor(), (p) => {
      const at = readPayloadMeta(p).layout.codes.offsetBytes + (n >>> 1);
      p[at] = p[at]! | 0x10;
    });
    expect(message).toMatch(/padding nibble/);
  });

  it('an empty tensor whose escape index does not start at 0', async () => {
    const values = new Uint16Array(0);
    const t: BlockTensor = { ...makeBlockTensor(0, [], 1), values, payload: encode(values, createCodebook(CODEBOOK_EXPONENTS), { chunkSize: 1024 }) };
    expect(await expectDecodeProblem(t, (p) => setEscapeIndex(p, 0, 1))).toMatch(/escape index must start at 0/);
  });
});

describe('verify decode: the other failures, unchanged', () => {
  it('a flipped payload byte is a checksum failure (BLOB_CORRUPT) before any decode, with and without decode', async () => {
    const t = makeBlockTensor(4097, [1000], 41);
    const payload = t.payload.slice();
    payload[payload.length - 3]! ^= 1;
    const store = await openCacheStore(await makeTempDir(), { create: true });
    await store.addEntry({ key: t.key, qualname: 'good', payload: t.payload, shape: t.shape, dtype: 'BF16' });
    const entries = entriesOf(store);
    for (const decode of [false, true]) {
      for (const block of BLOCK_VALUES) {
        const report = await verifyEntries(payloadBackend(new Map([[t.key, payload]])), entries, 0, { decode }, 2 * block);
        expect(report.problems.map((p) => p.code)).toEqual(['BLOB_CORRUPT']);
        expect(report.problems[0]!.message).toMatch(/^BLOB_CORRUPT: blob checksum fails: CHECKSUM_MISMATCH/);
      }
    }
    await store.close();
  });

});
