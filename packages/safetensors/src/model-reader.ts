import { SafetensorsError } from './errors.js';
import { MAX_BUFFER_BYTES } from './node-limits.js';
import { quoteValue } from './quote-value.js';
import type { SafetensorsModel, TensorInfo } from './types.js';

/**
 * How readTensorBytes/iterateTensors reach a model's open files. Keyed by a registered symbol (not a
 * class identity) so the ESM and CJS builds of this package interoperate.
 */
export const MODEL_READER: unique symbol = Symbol.for('@splitzip/safetensors/model-reader') as never;

export interface ModelReader {
  /** Fills `target` from a shard at `positionBytes` (file or ByteSource object); MODEL_CLOSED after close(). */
  readAt(shardName: string, target: Uint8Array, positionBytes: number, tensor?: string): Promise<void>;
  /** The shard's stamp now (readShardStamp); null for ByteSource models, unknown shards and after close(). */
  stampNow(shardName: string): string | null;
  /** A path naming the shard's open file (readShardDescriptorPath); null for ByteSource models, unknown shards and after close(). */
  descriptorPath(shardName: string): string | null;
  /** isShardHeaderUnchanged: true for ByteSource models, unknown shards and after close(). */
  headerUnchanged(shardName: string): boolean;
  /**
   * A scratch buffer of at least `minBytes` for iterateTensors' reuse mode: pooled per model so that
   * repeated iterations do not fault in fresh pages each time. Exclusive until given back.
   */
  takeBuffer(minBytes: number): Uint8Array;
  /** Returns a buffer to the pool (kept only while the pool is small; dropped after close()). */
  giveBackBuffer(buffer: Uint8Array): void;
}

/** Pool bounds: at most this many idle buffers per model, each at most MAX_POOLED_BUFFER_BYTES. */
export const MAX_POOLED_BUFFERS = 2;
export const MAX_POOLED_BUFFER_BYTES = 64 << 20;

/** Uninitialised memory: every byte is overwritten by a read before anyone sees it. */
export function allocateUninitialized(sizeBytes: number): Uint8Array {
  const buffer = Buffer.allocUnsafeSlow(sizeBytes);
  return new Uint8Array(buffer.buffer, buffer.byteOffset, sizeBytes);
}

/** TENSOR_TOO_LARGE for a tensor no single buffer can hold: checked before allocating one for it. */
export function checkFitsOneBuffer(tensor: TensorInfo): void {
  const { offsetBytes, sizeBytes } = tensor.slice;
  if (sizeBytes > MAX_BUFFER_BYTES) {
    throw new SafetensorsError('TENSOR_TOO_LARGE', `tensor has ${sizeBytes} bytes, more than one buffer can hold (MAX_BUFFER_BYTES = ${MAX_BUFFER_BYTES})`, {
      file: tensor.shardPath,
      tensor: tensor.name,
      offsets: { expected: MAX_BUFFER_BYTES, actual: sizeBytes, position: offsetBytes },
    });
  }
}

export function getModelReader(model: SafetensorsModel): ModelReader {
  const reader = (model as unknown as { [MODEL_READER]?: ModelReader })[MODEL_READER];
  if (!reader) {
    throw new SafetensorsError('INVALID_ARGUMENT', 'not a model opened by openSafetensorsModel()');
  }
  return reader;
}

/** The model's own TensorInfo for a name or a TensorInfo (which must match the model's). */
export function resolveTensor(model: SafetensorsModel, tensor: TensorInfo | string): TensorInfo {
  const name = typeof tensor === 'string' ? tensor : tensor?.name;
  const found = typeof name === 'string' ? model.getTensor(name) : undefined;
  if (
    !found ||
    (typeof tensor !== 'string' &&
      (found.slice.shardName !== tensor.slice?.shardName ||
        found.slice.offsetBytes !== tensor.slice?.offsetBytes ||
        found.slice.sizeBytes !== tensor.slice?.sizeBytes))
  ) {
    throw new SafetensorsError('UNKNOWN_TENSOR', 'no such tensor in this model', { file: model.rootDir, tensor: typeof name === 'string' ? name : quoteValue(name) });
  }
  return found;
}
