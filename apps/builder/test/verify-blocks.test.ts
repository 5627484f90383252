// verify --model goes through a tensor larger than a block a block at a time (VERIFY_BLOCK_BYTES;
// here `blockBytes`, small): the content key hashed and the payload decoded and compared block by
// block, so that neither the file's bytes nor the decoded tensor are held whole. Sizes are chosen
// to be multiples of nothing in sight: not of the block, the chunk (1,024 values), 2 or 4 values.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { calibrateCodebook, encode, readPayloadMeta } from '@splitzip/codec';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { openCacheStore, type CacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isBuilderError } from '../src/errors.js';
import { verifyModelCache, type ModelCheckReport } from '../src/verify-model-cache.js';
import { createRandom, createTempDir, gaussianBf16, toBf16, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';
import { seedContentKey } from './helpers/reports.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-verify-blocks-');
});
afterAll(async () => temp?.cleanup());

/** 3,077 values (3 chunks and 5 values): 6,154 bytes, not a multiple of 4. */
const VALUES = 3077;
/** 999 values a block: blocks [0, 999), [999, 1998), [1998, 2997), [2997, 3077). */
const BLOCK_BYTES = 1998;

const valuesOf = (tensor: TensorData): Uint16Array => new Uint16Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength / 2);

/** Where tensorWithEscapes puts its escapes: both sides of every block boundary of BLOCK_BYTES and chunk boundary, and the ends. */
const ESCAPES = [0, 998, 999, 1000, 1023, 1024, 1997, 1998, 2047, 2048, 2996, 2997, VALUES - 1];

/**
 * Values over 16 binades, equally often (so these are the codebook's 16 exponents), and at ESCAPES
 * values of other binades (2^40 and up), each of its own: escapes.
 */
function tensorWithEscapes(name: string, seed: number): TensorData {
  const random = createRandom(seed);
  const values = new Uint16Array(VALUES);
  for (let i = 0; i < VALUES; i++) values[i] = toBf16((random() < 0.5 ? -1 : 1) * (1 + random() / 2) * 2 ** -(3 + (i % 16)));
  ESCAPES.forEach((at, k) => (values[at] = toBf16((k % 2 ? -1 : 1) * 2 ** (40 + k))));
  return { name, dtype: 'BF16', shape: [VALUES], data: new Uint8Array(values.buffer) };
}

let sequence = 0;

/**
 * A model of `tensors` and a cache whose entry for each holds the payload of `stored(tensor)`'s
 * values (by default its own), under the tensor's content key, its slice bound.
 */
async function modelAndCache(tensors: TensorData[], stored: (tensor: TensorData) => Uint16Array = valuesOf): Promise<{ modelPath: string; store: CacheStore }> {
  sequence++;
  const modelPath = await writeSingleFileModel(join(temp.path, `m${sequence}.safetensors`), tensors);
  const store = await openCacheStore(join(temp.path, `c${sequence}`), { create: true });
  const model = await openSafetensorsModel(modelPath);
  try {
    for (const tensor of tensors) {
      const values = stored(tensor);
      const payload = encode(values, calibrateCodebook(values).codebook);
      await store.addEntry({ key: seedContentKey(tensor), qualname: tensor.name, payload, shape: tensor.shape, dtype: 'BF16' });
      const { shardName, offsetBytes, sizeBytes } = model.getTensor(tensor.name)!.slice;
      expect(await store.aliasSlice(seedContentKey(tensor), shardName, offsetBytes, sizeBytes, model.shards[0]!.stamp ?? undefined)).toBe(true);
    }
  } finally {
    await model.close();
  }
  return { modelPath, store };
}

/** verifyModelCache with `blockBytes`, and the progress events it gave per tensor. */
async function verifyInBlocks(store: CacheStore, modelPath: string, blockBytes: number, signal?: AbortSignal): Promise<{ report: ModelCheckReport; events: Map<string, number[]> }> {
  const events = new Map<string, number[]>();
  const report = await verifyModelCache(store, modelPath, {
    coverageMin: 0.99,
    blockBytes,
    signal,
    onProgress: ({ tensor, doneBytes }) => events.set(tensor, [...(events.get(tensor) ?? []), doneBytes]),
  });
  return { report, events };
}

/** The tensor's values with `at`'s changed as `change` says. */
function changedAt(tensor: TensorData, at: readonly number[], change: (value: number) => number): Uint16Array {
  const values = valuesOf(tensor).slice();
  for (const i of at) values[i] = change(values[i]!);
  return values;
}

describe('verify --model in blocks', () => {
  it('passes tensors of sizes no block divides, block by block (progress after every block), with the keys of a whole read', async () => {
    const tensors = [gaussianBf16('a', [VALUES], 11), gaussianBf16('b', [5, 411], 12), gaussianBf16('c', [1025], 13), gaussianBf16('d', [1], 14)];
    const { modelPath, store } = await modelAndCache(tensors);
    try {
      const whole = await verifyModelCache(store, modelPath, { coverageMin: 0.99 });
      expect(whole.ok).toBe(true);
      // One value, three, 999, 1,023 and 1,025 a block, and 4 KiB (two chunks).
      for (const blockBytes of [2, 6, BLOCK_BYTES, 2046, 2050, 4096]) {
        const { report, events } = await verifyInBlocks(store, modelPath, blockBytes);
        expect(report.tensors.map((t) => [t.name, t.status, t.reason, t.key]), `blockBytes ${blockBytes}`).toEqual(whole.tensors.map((t) => [t.name, 'ok', null, t.key]));
        expect(report.tensors.map((t) => t.key)).toEqual(tensors.map(seedContentKey));
        let before = 0;
        for (const tensor of tensors) {
          const size = tensor.data.byteLength;
          const blocks = Math.ceil(size / blockBytes);
          // A tensor of several blocks reports each but its last, then itself, done.
          const expected = [...Array.from({ length: blocks - 1 }, (_, k) => before + (k + 1) * blockBytes), before + size];
          expect(events.get(tensor.name), `${tensor.name}, blockBytes ${blockBytes}`).toEqual(expected);
          before += size;
        }
      }
    } finally {
      await store.close();
    }
  });

  it('passes a tensor whose escapes sit on both sides of block and chunk boundaries', async () => {
    const tensor = tensorWithEscapes('e', 21);
    const { modelPath, store } = await modelAndCache([tensor]);
    try {
      const payload = encode(valuesOf(tensor), calibrateCodebook(valuesOf(tensor)).codebook);
      expect(readPayloadMeta(payload).escapeCount).toBe(ESCAPES.length);
      for (const blockBytes of [2, 6, BLOCK_BYTES, 2046, 2050]) {
        const { report, events } = await verifyInBlocks(store, modelPath, blockBytes);
        expect(report.tensors.map((t) => [t.status, t.reason]), `blockBytes ${blockBytes}`).toEqual([['ok', null]]);
        expect(events.get('e')).toHaveLength(Math.ceil((2 * VALUES) / blockBytes));
      }
    } finally {
      await store.close();
    }
  });

  for (const [where, at] of [
    ['the middle block', [1500, 3000]],
    ['the last block', [3076]],
    ['the first value of the last block, an escape', [2997]],
    ['an escape just past a block boundary', [999]],
  ] as const) {
    it(`reports a decoded value that differs in ${where} at its index`, async () => {
      const tensor = tensorWithEscapes('x', 31);
      // The entry's payload decodes to the file's values but one (or two): a mantissa bit, or an escape's exponent.
      const { modelPath, store } = await modelAndCache([tensor], (t) => changedAt(t, at, (v) => (((v >>> 7) & 0xff) > 140 ? v ^ 0x0080 : v ^ 0x0001)));
      try {
        for (const blockBytes of [BLOCK_BYTES, 6]) {
          const { report } = await verifyInBlocks(store, modelPath, blockBytes);
          const first = at[0];
          const file = valuesOf(tensor)[first]!;
          expect(report.ok).toBe(false);
          expect(report.tensors, `blockBytes ${blockBytes}`).toEqual([
            expect.objectContaining({
              name: 'x',
              status: 'failed',
              reason: expect.stringMatching(new RegExp(`^decoded bytes differ from the file at value ${first} \\(byte ${2 * first} of the tensor\\): the file holds 0x${file.toString(16).padStart(4, '0')}, `)),
              firstDifference: { index: first, offsetBytes: 2 * first },
            }),
          ]);
        }
      } finally {
        await store.close();
      }
    });
  }

  it('stops at Ctrl-C between the blocks of a tensor, not only between tensors', async () => {
    const { modelPath, store } = await modelAndCache([gaussianBf16('only', [VALUES], 41)]);
    try {
      const controller = new AbortController();
      const run = verifyModelCache(store, modelPath, {
        coverageMin: 0.99,
        blockBytes: BLOCK_BYTES,
        signal: controller.signal,
        onProgress: () => controller.abort(new Error('interrupted')),
      });
      await expect(run).rejects.toSatisfy((error: unknown) => isBuilderError(error, 'INTERRUPTED'));
    } finally {
      await store.close();
    }
  });

  it('fails MODEL_CHANGED when a shard is rewritten while a tensor is read in blocks', async () => {
    const { modelPath, store } = await modelAndCache([gaussianBf16('only', [VALUES], 51)]);
    try {
      let appended = false;
      const run = verifyModelCache(store, modelPath, {
        coverageMin: 0.99,
        blockBytes: BLOCK_BYTES,
        onProgress: () => {
          if (appended) return;
          appended = true;
          // After the first block: the file grows (its size and mtime move) under the open model.
          appendFileSync(modelPath, new Uint8Array(16));
        },
      });
      await expect(run).rejects.toSatisfy((error: unknown) => isBuilderError(error, 'MODEL_CHANGED') && /was rewritten while it was read/.test((error as Error).message));
    } finally {
      await store.close();
    }
  });
});
