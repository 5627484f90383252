// Reads part of a tensor from its shard, for checks that go through a large tensor a block at a
// time (verify --model). The safetensors package reads a tensor only whole (readTensorBytes), so
// the blocks are read through the descriptor the model holds open (readShardDescriptorPath: the
// very file it parsed, whatever its path names now), and the shard's stamp is checked once the
// tensor's last block is in, as the model's own reads check it.
import { open, type FileHandle } from 'node:fs/promises';
import { isSameFileContentStamp, readShardDescriptorPath, readShardStamp, type SafetensorsModel, type TensorInfo } from '@splitzip/safetensors';
import type { S3Object } from '@splitzip/store';
import { describeError } from './describe-error.js';
import { describeModelObjectChanged } from './open-builder-model.js';
import { BuilderError } from './errors.js';

/** Most bytes one read(2) asks for: Node refuses reads of 2 GiB and more. */
const MAX_READ_BYTES = 1 << 30;

export interface TensorBlockReader {
  /** Fills `target` with the tensor's bytes [fromBytes, fromBytes + target.length) and returns it. */
  read(tensor: TensorInfo, fromBytes: number, target: Uint8Array): Promise<Uint8Array>;
  /** MODEL_CHANGED when the tensor's shard was rewritten since the model was opened. */
  checkUnchanged(tensor: TensorInfo): void;
  /** Closes the shard file it holds (idempotent). */
  close(): Promise<void>;
}

/**
 * A reader of `model`'s shards that holds one file open at a time (tensors come in shard order).
 * With `openObject` (an s3:// model, open-builder-model.ts) the blocks are ranged reads of the shard
 * objects, each bound to the version the model was opened with (If-Match): a replaced object fails
 * them, MODEL_CHANGED, so no stamp is looked at afterwards.
 */
export function createTensorBlockReader(model: SafetensorsModel, openObject?: (shardName: string) => Promise<S3Object>): TensorBlockReader {
  if (openObject !== undefined) return createObjectBlockReader(openObject);
  let current: { shardName: string; handle: Promise<FileHandle> } | undefined;

  const handleFor = (tensor: TensorInfo): Promise<FileHandle> => {
    const { shardName } = tensor.slice;
    if (current?.shardName === shardName) return current.handle;
    const previous = current?.handle;
    const path = readShardDescriptorPath(model, shardName) ?? tensor.shardPath;
    const handle = (async () => {
      await previous?.then((h) => h.close()).catch(() => {});
      return open(path, 'r').catch((cause: unknown) => {
        throw new BuilderError('TENSOR_FAILED', `cannot open ${tensor.shardPath} to read ${tensor.name}: ${describeError(cause)}`, { file: tensor.shardPath, tensor: tensor.name }, { cause });
      });
    })();
    handle.catch(() => {});
    current = { shardName, handle };
    return handle;
  };

  return {
    async read(tensor, fromBytes, target) {
      const handle = await handleFor(tensor);
      const position = tensor.slice.offsetBytes + fromBytes;
      for (let done = 0; done < target.length; ) {
        let bytesRead: number;
        try {
          ({ bytesRead } = await handle.read(target, done, Math.min(target.length - done, MAX_READ_BYTES), position + done));
        } catch (cause) {
          throw new BuilderError('TENSOR_FAILED', `cannot read ${target.length - done} bytes at ${position + done} of ${tensor.shardPath}: ${describeError(cause)}`, { file: tensor.shardPath, tensor: tensor.name }, { cause });
        }
        if (bytesRead === 0) throw changedError(tensor, `it ended at ${position + done}, inside the tensor`);
        done += bytesRead;
      }
      return target;
    },
    checkUnchanged(tensor) {
      const shard = model.shards.find((s) => s.name === tensor.slice.shardName);
      const now = readShardStamp(model, tensor.slice.shardName);
      if (shard?.stamp == null || now === null || isSameFileContentStamp(now, shard.stamp)) return;
      throw changedError(tensor, `its stamp (size:mtime:ctime:inode) went from ${shard.stamp} to ${now}`);
    },
    async close() {
      const handle = current?.handle;
      current = undefined;
      await handle?.then((h) => h.close()).catch(() => {});
    },
  };
}

function changedError(tensor: TensorInfo, how: string): BuilderError {
  return new BuilderError('MODEL_CHANGED', `MODEL_CHANGED: ${tensor.shardPath} was rewritten while it was read (${how}): run verify again once the model is no longer being written`, {
    file: tensor.shardPath,
    tensor: tensor.name,
  });
}

/** createTensorBlockReader over an s3:// model's objects: one opened object at a time. */
function createObjectBlockReader(openObject: (shardName: string) => Promise<S3Object>): TensorBlockReader {
  let current: { shardName: string; object: Promise<S3Object> } | undefined;
  return {
    async read(tensor, fromBytes, target) {
      const { shardName } = tensor.slice;
      if (current?.shardName !== shardName) {
        const object = openObject(shardName);
        object.catch(() => {});
        current = { shardName, object };
      }
      const object = await current.object;
      const position = tensor.slice.offsetBytes + fromBytes;
      try {
        for (let done = 0; done < target.length; done += MAX_READ_BYTES) {
          await object.readInto(position + done, target.subarray(done, Math.min(target.length, done + MAX_READ_BYTES)));
        }
      } catch (cause) {
        throw describeModelObjectChanged(cause, { file: tensor.shardPath, tensor: tensor.name, verb: 'verify' }) ?? cause;
      }
      return target;
    },
    checkUnchanged() {},
    async close() {
      current = undefined;
    },
  };
}
