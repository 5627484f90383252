// verify({ decode: true }) decodes and hashes each entry a block at a time (VERIFY_DECODE_BLOCK_BYTES):
// it decoded whole, and a 4 GiB tensor held its decoded values beside its payload (~7.3 GB).
// The codec's decoders are wrapped to see the sizes verify decodes.
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as codec from '@splitzip/codec';
import { openCacheStore } from '../src/index.js';
import { verifyEntries } from '../src/verify-entries.js';
import { VERIFY_DECODE_BLOCK_BYTES } from '../src/hash-decoded-blocks.js';
import { makeTempDir } from './helpers.js';
import { entriesOf, makeBlockTensor, payloadBackend, type BlockTensor } from './verify-decode-blocks.js';

vi.mock('@splitzip/codec', async (importOriginal) => {
  const actual = await importOriginal<typeof codec>();
  return { ...actual, decode: vi.fn(actual.decode), decodeRange: vi.fn(actual.decodeRange), decodeChunks: vi.fn(actual.decodeChunks) };
});

const decodeSpy = vi.mocked(codec.decode);
const decodeRangeSpy = vi.mocked(codec.decodeRange);
const decodeChunksSpy = vi.mocked(codec.decodeChunks);

afterEach(() => {
  decodeSpy.mockClear();
  decodeRangeSpy.mockClear();
  decodeChunksSpy.mockClear();
});

/** Values decoded per call of the codec's decoders since the last clear (a whole decode counts its element count). */
function decodedCallSizes(): number[] {
  return [
    ...decodeSpy.mock.calls.map(([payload]) => codec.readPayloadMeta(payload).elementCount),
    ...decodeRangeSpy.mock.calls.map((call) => call[2]),
    ...decodeChunksSpy.mock.calls.map(([payload, meta, , chunkCount]) => Math.min(chunkCount * meta.chunkSize, codec.readPayloadMeta(payload).elementCount)),
  ];
}

async function storeOf(tensors: readonly BlockTensor[], withSha256: (i: number) => boolean) {
  const store = await openCacheStore(await makeTempDir(), { create: true });
  await store.addEntries(
    tensors.map((t, i) => ({ key: t.key, qualname: `t${i}`, payload: t.payload, shape: t.shape, dtype: 'BF16' as const, sha256: withSha256(i) ? t.sha256 : null })),
  );
  return store;
}

// Sizes that are not multiples of the block, of the chunk (1024), of 2 or of 4, and some that are.
const COUNTS = [1, 2, 3, 5, 1023, 1024, 1025, 2047, 4097, 3 * 1024 + 3];
const BLOCK_VALUES = [1, 3, 4, 1000, 1024, 1026];

describe('verify decode, block by block', () => {
  for (const block of BLOCK_VALUES) {
    it(`blocks of ${block} value(s): every tensor hashes to its content key and sha256, escapes straddling every block edge`, async () => {
      const tensors = COUNTS.map((n, i) => makeBlockTensor(n, [block], 100 * block + i));
      for (const t of tensors) expect(codec.readPayloadMeta(t.payload).escapeCount).toBeGreaterThan(0);
      const store = await storeOf(tensors, (i) => i % 2 === 0);
      const payloads = new Map(tensors.map((t) => [t.key, t.payload]));
      decodeRangeSpy.mockClear();
      const report = await verifyEntries(payloadBackend(payloads), entriesOf(store), 0, { decode: true }, 2 * block);
      expect(report).toMatchObject({ ok: true, checked: tensors.length, decoded: tensors.length, problems: [] });
      const sizes = decodedCallSizes();
      expect(Math.max(...sizes)).toBeLessThanOrEqual(block);
      expect(sizes.length).toBe(COUNTS.reduce((sum, n) => sum + Math.ceil(n / block), 0));
      await store.close();
    });
  }

  it('an empty tensor is decoded (its escape index checked) and hashed once', async () => {
    const t = makeBlockTensor(0, [], 7);
    const store = await storeOf([t], () => true);
    decodeRangeSpy.mockClear();
    const report = await verifyEntries(payloadBackend(new Map([[t.key, t.payload]])), entriesOf(store), 0, { decode: true }, 6);
    expect(report).toMatchObject({ ok: true, decoded: 1 });
    expect(decodeRangeSpy.mock.calls.map((call) => call[2])).toEqual([0]);
    await store.close();
  });

  it('store.verify decodes at most VERIFY_DECODE_BLOCK_BYTES at a time (1 MiB): a tensor of 2 blocks and 3 values takes 3 calls', async () => {
    expect(VERIFY_DECODE_BLOCK_BYTES).toBe(2 ** 20);
    const blockValues = VERIFY_DECODE_BLOCK_BYTES / 2;
    const t = makeBlockTensor(2 * blockValues + 3, [blockValues], 11, 4096);
    const small = makeBlockTensor(4097, [1000], 12);
    const store = await storeOf([t, small], () => true);
    decodeRangeSpy.mockClear();
    expect(await store.verify({ decode: true })).toMatchObject({ ok: true, decoded: 2, problems: [] });
    // The two entries are checked at once (verifyEntries): their calls interleave.
    expect(decodedCallSizes().sort((a, b) => a - b)).toEqual([3, 4097, blockValues, blockValues]);
    await store.close();
  });

  it('a valid payload of other values under a key (or with another sha256) is DIGEST_MISMATCH, as before, after a blocked decode', async () => {
    const t = makeBlockTensor(4097, [1000], 21);
    const other = makeBlockTensor(4097, [1000], 22);
    const store = await openCacheStore(await makeTempDir(), { create: true });
    // The key of t over the payload of other: valid header and checksum, only the decoded bytes tell.
    await store.addEntry({ key: t.key, qualname: 'swapped', payload: other.payload, shape: t.shape, dtype: 'BF16' });
    await store.addEntry({ key: other.key, qualname: 'wrong-sha', payload: other.payload, shape: other.shape, dtype: 'BF16', sha256: t.sha256 });
    decodeRangeSpy.mockClear();
    const report = await verifyEntries(payloadBackend(new Map([[t.key, other.payload], [other.key, other.payload]])), entriesOf(store), 0, { decode: true }, 2000);
    expect(report.problems).toEqual([
      { key: t.key, qualname: 'swapped', code: 'DIGEST_MISMATCH', message: `DIGEST_MISMATCH: decoded tensor does not hash to its content key (entry ${t.key})` },
      { key: other.key, qualname: 'wrong-sha', code: 'DIGEST_MISMATCH', message: `DIGEST_MISMATCH: decoded tensor SHA-256 differs from the original sha256 (entry ${other.key})` },
    ]);
    expect(Math.max(...decodedCallSizes())).toBeLessThanOrEqual(1000);
    await store.close();
  });

  it('refuses a block size that is odd or below one value (tests-only parameter)', async () => {
    for (const bytes of [0, 1, 3, -2, 2.5]) {
      await expect(verifyEntries(payloadBackend(new Map()), [], 0, { decode: true }, bytes)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });
});
