import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { iterateTensors, openSafetensorsModel, writeSafetensorsFile, type TensorToWrite } from '../src/index.js';
import { MODEL_READER, type ModelReader } from '../src/model-reader.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

// Four 4-byte tensors; maxBufferBytes 8 makes two batches of two, so when the consumer closes the
// model after the first tensor, the rest of batch 0 and the read-ahead of batch 1 are already read.
const tensors: TensorToWrite[] = ['a', 'b', 'c', 'd'].map((name, i) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(i + 1) }));

describe('an iterator open when its model is closed', () => {
  for (const reuseBuffers of [false, true]) {
    it(`yields nothing more: MODEL_CLOSED at the next step, and gives its buffers up (reuseBuffers ${reuseBuffers})`, async () => {
      await withTempDir(async (dir) => {
        const path = join(dir, 'model.safetensors');
        await writeSafetensorsFile(path, tensors);
        const model = await openSafetensorsModel(path);
        const reader = (model as unknown as { [MODEL_READER]: ModelReader })[MODEL_READER];
        const given: Uint8Array[] = [];
        const giveBack = reader.giveBackBuffer.bind(reader);
        reader.giveBackBuffer = (buffer) => {
          given.push(buffer);
          giveBack(buffer);
        };
        const iterator = iterateTensors(model, { maxBufferBytes: 8, reuseBuffers });
        const first = await iterator.next();
        expect(first.done).toBe(false);
        await model.close();
        // Was: b (already in the batch) was yielded, and with a read-ahead done, c and d too.
        const error = await catchErrorAsync(() => iterator.next());
        expectCode(error, 'MODEL_CLOSED');
        expect((await iterator.next()).done).toBe(true);
        // The reused buffers went back (and the closed model's pool drops them).
        expect(given.length).toBe(reuseBuffers ? 2 : 0);
        const after = await catchErrorAsync(async () => {
          for await (const item of iterateTensors(model)) void item;
        });
        expectCode(after, 'MODEL_CLOSED');
      });
    });
  }
});
