import type { SafetensorsModel } from '@splitzip/safetensors';

/**
 * What was opened, for a message: the index file, the single file, or the directory of shards
 * without an index (`model at <rootDir>` named the folder of a model opened by its file path, which
 * may hold other models' files).
 */
export function describeOpenedModel(model: SafetensorsModel): { text: string; modelPath: string } {
  if (model.indexPath !== null) return { text: `model ${model.indexPath}`, modelPath: model.indexPath };
  const shards = model.shards;
  if (shards.length === 1 && typeof shards[0]?.path === 'string') return { text: `model ${shards[0].path}`, modelPath: shards[0].path };
  return { text: `model at ${model.rootDir}`, modelPath: model.rootDir };
}
