// A manifest entry bound to one of the model's tensors can claim a payload up to the format's bound
// (~4.3 bytes a value when every value escapes) with no blob behind it: a damaged manifest, or a
// hostile one. The runtime sized its staging pool from that claim (loadModel) or allocated a stage
// of that size (loadTensor) before the read found the blob missing. Now a stage above the staging
// cap (loadModel) or above CONFIRM_BLOB_ABOVE_BYTES (outside a pool) is allocated only once the
// store confirmed the blob's size; the tensor is served raw, bit-identical, either way.
import { readFile, rm } from 'node:fs/promises';
import { writeSignedManifest } from '@splitzip/test-support/manifest';
import { computePayloadLayout } from '@splitzip/codec';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CONFIRM_BLOB_ABOVE_BYTES } from '../src/serve-tensor.js';
import { createFileReader, loadModel, loadTensor, openShardCache, type ShardCache } from '../src/index.js';
import { openCachedModel, sameBytes, type CachedModelFixture, type FixtureTensor } from './fixtures.js';

const BIG_VALUES = 20_000_000;
const CHUNK_SIZE = 64;
let fixture: CachedModelFixture;
let claimedBytes = 0;

function bigTensor(): FixtureTensor {
  // One exponent (0x78) and every mantissa: Top-16 coverage 1, so the builder caches it.
  const values = new Uint16Array(BIG_VALUES);
  for (let i = 0; i < BIG_VALUES; i += 1) values[i] = 0x3c00 | (i & 0x7f);
  return { name: 'big', dtype: 'BF16', shape: [BIG_VALUES], data: new Uint8Array(values.buffer) };
}

beforeAll(async () => {
  const small: FixtureTensor = { name: 'small', dtype: 'BF16', shape: [4096], data: new Uint8Array(new Uint16Array(4096).fill(0x3f80).buffer) };
  fixture = await openCachedModel('hostile-size', [small, bigTensor()]);
  await fixture.cache.close();
  // The big tensor's entry now claims every value escapes (chunks of 64: the largest payload the
  // format allows for it), and its blob is gone.
  const cacheDir = `${fixture.dir}/cache`;
  const manifest = JSON.parse(await readFile(`${cacheDir}/manifest.json`, 'utf8')) as { entries: Record<string, Record<string, unknown>> };
  const [key, entry] = Object.entries(manifest.entries).find(([, value]) => value.qualname === 'big') as [string, Record<string, unknown>];
  claimedBytes = computePayloadLayout(BIG_VALUES, BIG_VALUES, CHUNK_SIZE).totalBytes;
  const meta = entry.meta as Record<string, unknown>;
  Object.assign(meta, { chunk_size: CHUNK_SIZE, chunk_count: Math.ceil(BIG_VALUES / CHUNK_SIZE), escape_count: BIG_VALUES, comp_bytes: claimedBytes });
  entry.comp_bytes = claimedBytes;
  await writeSignedManifest(`${cacheDir}/manifest.json`, manifest);
  await rm(`${cacheDir}/${String(entry.blob)}`);
  expect(key).toMatch(/^[0-9a-f]{40}$/);
  expect(claimedBytes).toBeGreaterThan(CONFIRM_BLOB_ABOVE_BYTES);
  fixture.cache = await openShardCache(cacheDir);
}, 60_000);

afterAll(async () => {
  await fixture?.close();
});

/** The cache handle with every blob read watched: the largest staging buffer any read was given. */
function watchStages(cache: ShardCache): { cache: ShardCache; largestStageBytes: () => number } {
  let largest = 0;
  const note = (slot: unknown) => {
    const bytes = slot instanceof Uint8Array ? slot : (slot as { bytes: Uint8Array }).bytes;
    largest = Math.max(largest, bytes.length);
  };
  const watched: ShardCache = {
    ...cache,
    readBlob: (key, slot, options) => {
      note(slot);
      return cache.readBlob(key, slot, options);
    },
    readBlobSync: cache.readBlobSync && ((key, slot, options) => (note(slot), cache.readBlobSync!(key, slot, options))),
    openBlobSync: cache.openBlobSync && ((key, slot) => (note(slot), cache.openBlobSync!(key, slot))),
  };
  return { cache: watched, largestStageBytes: () => largest };
}

it('loadModel sizes no staging slot from an unconfirmed claim above its staging cap', async () => {
  const { cache, largestStageBytes } = watchStages(fixture.cache);
  const maxStagingBytes = 16 * 1024 * 1024;
  const sources = new Map<string, string>();
  for await (const tensor of loadModel(fixture.model, cache, { backend: 'cpu', maxStagingBytes })) {
    sources.set(tensor.name, `${tensor.source}:${tensor.reason}:${tensor.report.error?.message ?? ''}`);
    expect(sameBytes(tensor.data, fixture.raw.get(tensor.name) as Uint8Array)).toBe(true);
  }
  expect(sources.get('small')).toMatch(/^cache:/);
  expect(sources.get('big')).toMatch(/^raw:cache-failed:.*does not exist/);
  expect(largestStageBytes()).toBeGreaterThan(0);
  expect(largestStageBytes()).toBeLessThan(maxStagingBytes);
}, 60_000);

it('loadTensor allocates no stage outside a pool before the blob is confirmed', async () => {
  const { cache, largestStageBytes } = watchStages(fixture.cache);
  const tensor = await loadTensor({ model: fixture.model, name: 'big' }, { cache, backend: 'cpu' });
  expect(tensor.source).toBe('raw');
  expect(tensor.reason).toBe('cache-failed');
  expect(tensor.report.error?.message).toMatch(/does not exist/);
  expect(sameBytes(tensor.data, fixture.raw.get('big') as Uint8Array)).toBe(true);
  expect(largestStageBytes()).toBe(0);
  // The check does not stand in the way of a real blob: the small tensor still comes from the cache.
  expect((await loadTensor({ model: fixture.model, name: 'small' }, { cache: fixture.cache })).source).toBe('cache');
}, 60_000);

it('a custom reader (the streamed path) allocates no stage before the blob is confirmed either', async () => {
  const files = createFileReader();
  let largestTarget = 0;
  const reader = {
    readExact: (path: string, target: Uint8Array, positionBytes: number) => {
      largestTarget = Math.max(largestTarget, target.length);
      return files.readExact(path, target, positionBytes);
    },
    close: () => files.close(),
  };
  try {
    const tensor = await loadTensor({ model: fixture.model, name: 'big' }, { cache: fixture.cache, backend: 'cpu', reader });
    expect(tensor.source).toBe('raw');
    expect(tensor.report.error?.message).toMatch(/does not exist/);
    expect(sameBytes(tensor.data, fixture.raw.get('big') as Uint8Array)).toBe(true);
    // The raw read of the shard is the reader's too: nothing of the claimed payload's size.
    expect(largestTarget).toBeLessThan(claimedBytes);
    const load = loadModel(fixture.model, fixture.cache, { backend: 'cpu', reader, maxStagingBytes: 16 * 1024 * 1024 });
    for await (const loaded of load) expect(sameBytes(loaded.data, fixture.raw.get(loaded.name) as Uint8Array)).toBe(true);
    expect(load.totals.stagingOverflows).toBe(0);
  } finally {
    await reader.close();
  }
}, 60_000);
