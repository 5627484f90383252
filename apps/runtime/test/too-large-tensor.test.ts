// A raw tensor larger than one buffer can be (MAX_TENSOR_BUFFER_BYTES: 4 GiB on Node 20) is a
// TENSOR_TOO_LARGE naming it, before any read: it used to be a bare RangeError from the
// runtime's own allocation. The shard is sparse: no disk space, and its bytes are never read.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { writeSparseSafetensors } from '@splitzip/test-support/fixtures';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadModel, loadTensor, MAX_TENSOR_BUFFER_BYTES } from '../src/index.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'splitzip-too-large-'));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

it('a raw tensor above MAX_TENSOR_BUFFER_BYTES is TENSOR_TOO_LARGE naming it; loadModel serves the rest with a filter', async () => {
  const hugeValues = Math.floor(MAX_TENSOR_BUFFER_BYTES / 2) + 1024;
  const path = join(dir, 'huge.safetensors');
  await writeSparseSafetensors(path, [['small', 2048], ['huge', hugeValues]]);
  const model = await openSafetensorsModel(path);
  try {
    await expect(loadTensor({ model, name: 'huge' }, { cache: null })).rejects.toMatchObject({
      name: 'RuntimeError',
      code: 'TENSOR_TOO_LARGE',
      details: { tensor: 'huge', sizeBytes: 2 * hugeValues, limit: MAX_TENSOR_BUFFER_BYTES },
    });
    const loaded = [];
    for await (const tensor of loadModel(model, null, { filter: (info) => info.name !== 'huge' })) loaded.push(tensor);
    expect(loaded.map((t) => [t.name, t.data.byteLength])).toEqual([['small', 4096]]);
    const all = async () => {
      for await (const tensor of loadModel(model, null)) void tensor;
    };
    await expect(all()).rejects.toMatchObject({ code: 'TENSOR_TOO_LARGE', details: { tensor: 'huge' } });
  } finally {
    await model.close();
  }
});
