// verify --model compares the decoded bytes with the file: an entry whose blob is a valid payload
// (header, checksum and manifest all agree) of OTHER values is reported, not passed.
import { join } from 'node:path';
import { calibrateCodebook, encode } from '@splitzip/codec';
import { openCacheStore } from '@splitzip/store';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { seedContentKey, type VerifyJson } from './helpers/reports.js';
import { assertBuilt, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir('splitzip-verify-bytes-');
});
afterAll(async () => temp?.cleanup());

it('verify --model fails a cached tensor whose valid blob decodes to other bytes', async () => {
  const x = gaussianBf16('x', [64, 64], 901);
  const y = gaussianBf16('y', [64, 64], 902);
  const modelPath = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [x]);
  const cacheDir = join(temp.path, 'cache');
  const model = await openSafetensorsModel(modelPath);
  const store = await openCacheStore(cacheDir, { create: true });
  try {
    const yValues = new Uint16Array(y.data.buffer, y.data.byteOffset, y.data.byteLength / 2);
    // x's content key, y's payload: self-consistent entry, wrong values.
    await store.addEntry({ key: seedContentKey(x), qualname: 'x', payload: encode(yValues, calibrateCodebook(yValues).codebook), shape: x.shape, dtype: 'BF16' });
    const { shardName, offsetBytes, sizeBytes } = model.getTensor('x')!.slice;
    const stamp = model.shards[0]!.stamp ?? undefined;
    expect(await store.aliasSlice(seedContentKey(x), shardName, offsetBytes, sizeBytes, stamp)).toBe(true);
  } finally {
    await store.close();
    await model.close();
  }
  const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath], 1);
  expect(json.ok).toBe(false);
  // Named with the first value that differs (x and y differ from their first value on).
  expect(json.model!.tensors).toEqual([expect.objectContaining({ name: 'x', status: 'failed', reason: expect.stringMatching(/^decoded bytes differ from the file at value 0 \(byte 0 of the tensor\): the file holds 0x[0-9a-f]{4}, the cache decodes 0x[0-9a-f]{4}$/), firstDifference: { index: 0, offsetBytes: 0 } })]);
});
