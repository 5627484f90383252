// Hermetic fixtures: small safetensors models written to temp dirs and caches built with the
// store and codec directly (calibrate → gate → encode → addEntries → aliasSlices), so each test
// controls exactly which tensors are cached.
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calibrateCodebook, createCodebook, encode } from '@splitzip/codec';
import {
  openSafetensorsModel,
  readTensorBytes,
  writeShardedModel,
  type ByteSource,
  type SafetensorsDtype,
  type SafetensorsModel,
} from '@splitzip/safetensors';
import { computeContentKey, openCacheStore, type AddEntryInput } from '@splitzip/store';
import { createRandom } from '@splitzip/test-support/random';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';

export interface FixtureTensor {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  data: Uint8Array;
}

export { createRandom };

/** BF16 weights like a trained layer: normal-ish values, exponents in a narrow band, a few outliers. */
export function bf16Weights(count: number, seed: number, outlierShare = 0.002): Uint8Array {
  const random = createRandom(seed);
  const values = new Uint16Array(count);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let i = 0; i < count; i += 1) {
    // Sum of uniforms ≈ normal; scale 0.02 like an initialised weight.
    const normal = (random() + random() + random() + random() - 2) * 0.035;
    f32[0] = random() < outlierShare ? normal * 2 ** (Math.floor(random() * 40) - 20) : normal;
    values[i] = (u32[0] as number) >>> 16;
  }
  return new Uint8Array(values.buffer);
}

/** BF16 values with exponents spread uniformly: Top-16 coverage far under any gate. */
export function bf16Spread(count: number, seed: number): Uint8Array {
  const random = createRandom(seed);
  const values = new Uint16Array(count);
  for (let i = 0; i < count; i += 1) values[i] = Math.floor(random() * 65536) & 0xff7f; // no NaN concerns: bit patterns only
  return new Uint8Array(values.buffer);
}

export function randomBytes(count: number, seed: number): Uint8Array {
  const random = createRandom(seed);
  const bytes = new Uint8Array(count);
  for (let i = 0; i < count; i += 1) bytes[i] = Math.floor(random() * 256);
  return bytes;
}

/**
 * A model's and its fine-tune's tensors: BF16 [64, 64] `<name>.weight` for each name, seeded
 * firstSeed, firstSeed + 1, ...; `changedSeed` moves b.weight's seed (the one tensor a fine-tune
 * changed, with the same layout and names).
 */
export function tunedWeights(names: readonly string[], firstSeed: number, changedSeed = 0): FixtureTensor[] {
  return names.map((name, k) => ({
    name: `${name}.weight`,
    dtype: 'BF16',
    shape: [64, 64],
    data: bf16Weights(4096, firstSeed + k + (name === 'b' ? changedSeed : 0)),
  }));
}

/** A model exercising every path: cached BF16 (odd sizes, empty, a duplicate), F32, I64, gate-failed BF16. */
export function standardTensors(): FixtureTensor[] {
  const weights = bf16Weights(5000, 7);
  return [
    { name: 'embed.weight', dtype: 'BF16', shape: [64, 100], data: bf16Weights(6400, 1) },
    { name: 'layer.0.attn.q', dtype: 'BF16', shape: [1001], data: bf16Weights(1001, 2) },
    { name: 'layer.0.attn.k', dtype: 'BF16', shape: [3, 7, 11], data: bf16Weights(231, 3) },
    { name: 'layer.0.norm', dtype: 'F32', shape: [257], data: randomBytes(257 * 4, 4) },
    { name: 'layer.0.mlp.up', dtype: 'BF16', shape: [50, 100], data: weights },
    { name: 'layer.0.mlp.up_copy', dtype: 'BF16', shape: [50, 100], data: weights.slice() },
    { name: 'layer.0.empty', dtype: 'BF16', shape: [0, 4], data: new Uint8Array(0) },
    { name: 'layer.0.spread', dtype: 'BF16', shape: [4099], data: bf16Spread(4099, 5) },
    { name: 'layer.0.positions', dtype: 'I64', shape: [33], data: randomBytes(33 * 8, 6) },
    { name: 'layer.1.attn.o', dtype: 'BF16', shape: [2, 1536], data: bf16Weights(3072, 8, 0.006) },
    { name: 'layer.1.one', dtype: 'BF16', shape: [1], data: bf16Weights(1, 9) },
    { name: 'lm_head', dtype: 'BF16', shape: [96, 70], data: bf16Weights(6720, 10) },
  ];
}

export async function makeTempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  // Resolved: a store names files under the directory it resolved at open (TMPDIR may be a link, as on macOS).
  const dir = await realpath(await mkdtemp(join(tmpdir(), `runtime-${prefix}-`)));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Writes a sharded model (small shards so slices span several files) and opens it. */
export async function writeModel(dir: string, tensors: FixtureTensor[], maxShardBytes = 24 * 1024, shardNamePrefix = 'model'): Promise<SafetensorsModel> {
  const { indexPath } = await writeShardedModel(dir, tensors, { maxShardBytes, shardNamePrefix });
  return openSafetensorsModel(indexPath);
}

export interface BuildOptions {
  coverageMin?: number;
  /** Move slices bound to other bytes (a model rewritten in place). */
  rebind?: boolean;
  /** Names to leave out of the cache entirely (they become "missing"). */
  skip?: readonly string[];
  /** Names whose entries are added but whose slices are not aliased. */
  noAlias?: readonly string[];
  chunkSize?: number;
  /** Open the store with sliceBindingsPerFile: a slice bound to other files' entries takes this file's binding beside them (revisions in one cache). */
  sliceBindingsPerFile?: boolean;
}

/** Builds a cache for `model` with the store and codec; returns the keys by tensor name. */
export async function buildCache(model: SafetensorsModel, cacheDir: string, options: BuildOptions = {}): Promise<Map<string, string>> {
  const coverageMin = options.coverageMin ?? 0.99;
  const store = await openCacheStore(cacheDir, { create: true, coverageMin, ...(options.sliceBindingsPerFile === true ? { sliceBindingsPerFile: true } : {}) });
  const keys = new Map<string, string>();
  const inputs = new Map<string, AddEntryInput>();
  const aliases: { key: string; shardName: string; offsetBytes: number; sizeBytes: number; stamp?: string }[] = [];
  try {
    for (const tensor of model.tensors) {
      if (tensor.dtype !== 'BF16' || options.skip?.includes(tensor.name)) continue;
      const bytes = await readTensorBytes(model, tensor);
      const values = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
      // An empty tensor has no exponents to calibrate: any one-exponent codebook encodes it.
      const { codebook, coverage } = values.length > 0 ? calibrateCodebook(values) : { codebook: createCodebook([127]), coverage: 1 };
      if (coverage < coverageMin) continue;
      const key = computeContentKey(bytes, tensor.shape, 'BF16');
      keys.set(tensor.name, key);
      if (!inputs.has(key)) {
        const payload = encode(values, codebook, { chunkSize: options.chunkSize ?? 1024 });
        inputs.set(key, {
          key,
          qualname: tensor.name,
          payload,
          shape: tensor.shape,
          dtype: 'BF16',
          sha256: createHash('sha256').update(bytes).digest('hex'),
        });
      }
      // As the builder: each binding records the stamp of the shard file it was verified against.
      const stamp = model.shards.find((shard) => shard.name === tensor.slice.shardName)?.stamp ?? undefined;
      if (!options.noAlias?.includes(tensor.name)) aliases.push({ key, ...tensor.slice, ...(stamp === undefined ? {} : { stamp }) });
    }
    await store.addEntries([...inputs.values()]);
    await store.aliasSlices(aliases, { rebind: options.rebind === true });
  } finally {
    await store.close();
  }
  return keys;
}

/** The raw bytes of every tensor, read with the safetensors package (the ground truth). */
export async function readAllRaw(model: SafetensorsModel): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  for (const tensor of model.tensors) out.set(tensor.name, await readTensorBytes(model, tensor));
  return out;
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** A model written from `tensors`, its cache built and opened, and its raw bytes: most suites' setup. */
export interface CachedModelFixture {
  model: SafetensorsModel;
  cache: ShardCache;
  raw: Map<string, Uint8Array>;
  dir: string;
  close(): Promise<void>;
}

export async function openCachedModel(prefix: string, tensors: FixtureTensor[] = standardTensors(), options: BuildOptions = {}): Promise<CachedModelFixture> {
  const temp = await makeTempDir(prefix);
  const model = await writeModel(`${temp.dir}/model`, tensors);
  await buildCache(model, `${temp.dir}/cache`, options);
  const cache = await openShardCache(`${temp.dir}/cache`);
  return {
    model,
    cache,
    raw: await readAllRaw(model),
    dir: temp.dir,
    async close() {
      await cache.close();
      await model.close();
      await temp.cleanup();
    },
  };
}

/** A model directory as an object store gives it (openS3ObjectSource's shape): every object with `etag`. */
export async function objectSource(dir: string, etag: string): Promise<ByteSource> {
  const names = await readdir(dir);
  return {
    url: `s3://bucket/${dir.split('/').pop()}/`,
    list: async () => names,
    open: async (name) => {
      if (!names.includes(name)) return undefined;
      const bytes = await readFile(join(dir, name));
      return { sizeBytes: bytes.length, etag, readInto: async (offset: number, target: Uint8Array) => target.set(bytes.subarray(offset, offset + target.length)) };
    },
  };
}
