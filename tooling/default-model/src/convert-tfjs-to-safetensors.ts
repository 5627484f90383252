import { writeShardedModel, type SafetensorsDtype, type ShardedModelResult, type TensorToWrite } from '@splitzip/safetensors';
import { convertFloat32BytesToBf16 } from './convert-float32-to-bf16.js';
import { readTfjsWeights, type TfjsWeight } from './read-tfjs-weights.js';

export interface ConvertTfjsOptions {
  /** Largest data section of one shard (default 6 MB: the default model becomes 3 shards). */
  maxShardBytes?: number;
  /** `__metadata__` written into every shard. */
  shardMetadata?: Record<string, string>;
  /** Extra fields of the index's metadata. */
  indexMetadata?: Record<string, unknown>;
}

export const DEFAULT_MODEL_SHARD_BYTES = 6_000_000;

/** float32 -> BF16 (round to nearest even); int32 -> I32 and bool -> BOOL unchanged; names and order as in the manifest. */
export function toSafetensorsTensors(weights: readonly TfjsWeight[]): TensorToWrite[] {
  return weights.map((weight) => {
    const dtype: SafetensorsDtype = weight.dtype === 'float32' ? 'BF16' : weight.dtype === 'int32' ? 'I32' : 'BOOL';
    const data = weight.dtype === 'float32' ? convertFloat32BytesToBf16(weight.bytes) : weight.bytes;
    return { name: weight.name, dtype, shape: weight.shape, data };
  });
}

/** Converts a tfjs model (model.json + shards) into a sharded BF16 safetensors model in outDir. */
export async function convertTfjsToSafetensors(modelJsonPath: string, outDir: string, options: ConvertTfjsOptions = {}): Promise<ShardedModelResult & { tensors: TensorToWrite[] }> {
  const tensors = toSafetensorsTensors(await readTfjsWeights(modelJsonPath));
  const result = await writeShardedModel(outDir, tensors, {
    maxShardBytes: options.maxShardBytes ?? DEFAULT_MODEL_SHARD_BYTES,
    shardMetadata: options.shardMetadata ?? null,
    ...(options.indexMetadata ? { indexMetadata: options.indexMetadata } : {}),
  });
  return { ...result, tensors };
}
