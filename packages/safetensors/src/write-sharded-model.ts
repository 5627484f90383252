import { resolve } from 'node:path';
import { checkTensorData } from './check-tensor-data.js';
import { createShardedModelWriter, type ShardedModelOptions, type ShardedModelResult } from './create-sharded-model-writer.js';
import type { TensorToWrite } from './types.js';

/**
 * Writes tensors as a sharded model (HF naming model-00001-of-00003.safetensors, split greedily at
 * maxShardBytes, tensors in the given order) plus model.safetensors.index.json, every file atomic.
 */
export async function writeShardedModel(dir: string, tensors: readonly TensorToWrite[], options: ShardedModelOptions): Promise<ShardedModelResult> {
  checkTensorData(tensors, typeof dir === 'string' ? resolve(dir) : String(dir));
  const writer = await createShardedModelWriter(dir, tensors, options);
  try {
    for (const tensor of tensors) await writer.write(tensor.data);
    return await writer.close();
  } catch (error) {
    await writer.abort();
    throw error;
  }
}
