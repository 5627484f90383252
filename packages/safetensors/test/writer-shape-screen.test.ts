import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSafetensorsWriter, createShardedModelWriter, MAX_TENSOR_RANK, planShards, writeSafetensorsFile, writeShardedModel, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

// Shapes computeTensorByteSize refuses (INVALID_ARGUMENT naming no file or tensor). Each writer must
// screen them itself: a rank-65 shape passed the writers' old screen (dtype and non-negative dims
// only) and failed as that bare INVALID_ARGUMENT instead of WRITE_INVALID_TENSOR naming file and tensor.
const sparse = [1, 1];
delete sparse[0]; // a hole: every() skips it, so an every()-based screen let it through
const badShapes: { label: string; shape: unknown; words: RegExp }[] = [
  { label: `rank ${MAX_TENSOR_RANK + 1}`, shape: new Array<number>(MAX_TENSOR_RANK + 1).fill(1), words: /rank 65, over MAX_TENSOR_RANK/ },
  { label: 'a dim past MAX_SAFE_INTEGER', shape: [2 ** 53], words: /shape\[0\] must be a non-negative safe integer/ },
  { label: 'a fractional dim', shape: [1, 1.5], words: /shape\[1\] must be a non-negative safe integer/ },
  { label: 'a hole in a sparse shape', shape: sparse, words: /shape\[0\] must be a non-negative safe integer/ },
];

describe('the writers screen a shape as computeTensorByteSize does: WRITE_INVALID_TENSOR naming file and tensor', () => {
  for (const { label, shape, words } of badShapes) {
    it(label, async () => {
      await withTempDir(async (dir) => {
        const tensor = { name: 'bad', dtype: 'U8', shape, data: new Uint8Array(1) } as unknown as TensorToWrite;
        const path = join(dir, 'x.safetensors');
        const model = join(dir, 'm');
        const calls: [string, string, () => Promise<unknown>][] = [
          ['writeSafetensorsFile', path, () => writeSafetensorsFile(path, [tensor])],
          ['createSafetensorsWriter', path, () => createSafetensorsWriter(path, [tensor])],
          ['writeShardedModel', model, () => writeShardedModel(model, [tensor], { maxShardBytes: 100 })],
          ['createShardedModelWriter', model, () => createShardedModelWriter(model, [tensor], { maxShardBytes: 100 })],
        ];
        for (const [call, file, run] of calls) {
          const error = await catchErrorAsync(run);
          expectCode(error, 'WRITE_INVALID_TENSOR');
          expect({ call, file: error.file, tensor: error.tensor }).toEqual({ call, file, tensor: 'bad' });
          expect(error.message).toMatch(words);
        }
        const planned = await catchErrorAsync(async () => planShards([tensor], 100));
        expectCode(planned, 'WRITE_INVALID_TENSOR');
        expect(planned.tensor).toBe('bad');
        expect(await readdir(dir)).toEqual([]);
      });
    });
  }
});
