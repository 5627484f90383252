// Node entry: everything of ./header plus the file-based operations.
export * from './header.js';
export { createSafetensorsWriter, type SafetensorsWriter, type SafetensorsWriterOptions } from './create-safetensors-writer.js';
export {
  createShardedModelWriter,
  formatShardName,
  planShards,
  type ShardPlan,
  type ShardedModelOptions,
  type ShardedModelResult,
  type ShardedModelWriter,
} from './create-sharded-model-writer.js';
export { MAX_BUFFER_BYTES, MAX_COMMIT_RECORD_BYTES } from './node-limits.js';
export { resumeShardedModelWrite, type ResumeShardedModelWriteOptions } from './resume-sharded-model-write.js';
export { iterateTensors, type IterateTensorsOptions, type TensorWithBytes } from './iterate-tensors.js';
export { openSafetensorsModel, type ByteSource, type ByteSourceObject, type OpenFromSourceOptions } from './open-safetensors-model.js';
export { isFromOtherFile, isSameFileContentStamp, isSameFileIgnoringCtime, parseFileStamp, readFileStamp, type FileStampFields } from './file-stamp.js';
export { isShardHeaderUnchanged, readShardDescriptorPath, readShardStamp } from './read-shard-stamp.js';
export { readTensorBytes } from './read-tensor-bytes.js';
export { writeSafetensorsFile } from './write-safetensors-file.js';
export { writeShardedModel } from './write-sharded-model.js';
