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
  takeBuffer(minBytes: number): Uint8Array<ArrayBuffer>;
  /** Returns a buffer to the pool (kept only while the pool is small; dropped after close()). */
  giveBackBuffer(buffer: Uint8Array<ArrayBuffer>): void;
  /** True once the model's close() was called (optional: a reader of an older copy of this package lacks it). */
  isClosed?(): boolean;
}

/** Pool bounds: at most this many idle buffers per model, each at most MAX_POOLED_BUFFER_BYTES. */
export const MAX_POOLED_BUFFERS = 2;
export const MAX_POOLED_BUFFER_BYTES = 64 << 20;

/** Uninitialised memory: every byte is overwritten by a read before anyone sees it. */
export function allocateUninitialized(sizeBytes: number): Uint8Array<ArrayBuffer> {
  const buffer = Buffer.allocUnsafeSlow(sizeBytes);
  // allocUnsafeSlow never pools nor shares: its buffer is an ordinary ArrayBuffer of its own.
  return new Uint8Array(buffer.buffer as ArrayBuffer, buffer.byteOffset, sizeBytes);
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
  const reader = (model as unknown as { [MODEL_READER]?: ModelReader } | null | undefined)?.[MODEL_READER];
  if (!reader) {
    throw new SafetensorsError('INVALID_ARGUMENT', `model must be a model opened by openSafetensorsModel(), got ${quoteValue(model)}`);
  }
  return reader;
}

/**
 * The model's own TensorInfo for a name or a TensorInfo (which must match the model's): INVALID_ARGUMENT
 * for anything else (null was UNKNOWN_TENSOR `tensor "undefined"`); UNKNOWN_TENSOR for a name the
 * model lacks, or a TensorInfo whose slice differs from the model's entry of that name (another
 * model's, or one forged), said as such.
 */
export function resolveTensor(model: SafetensorsModel, tensor: TensorInfo | string): TensorInfo {
  const name: unknown = typeof tensor === 'string' ? tensor : typeof tensor === 'object' && tensor !== null ? (tensor as { name?: unknown }).name : undefined;
  if (typeof name !== 'string') {
    throw new SafetensorsError('INVALID_ARGUMENT', `tensor must be a tensor name or a TensorInfo of this model, got ${quoteValue(tensor)}`, { file: model.rootDir });
  }
  const found = model.getTensor(name);
  if (!found) throw new SafetensorsError('UNKNOWN_TENSOR', 'no such tensor in this model', { file: model.rootDir, tensor: name });
  if (typeof tensor !== 'string') {
    const slice = (tensor as { slice?: Partial<TensorInfo['slice']> }).slice;
    if (found.slice.shardName !== slice?.shardName || found.slice.offsetBytes !== slice.offsetBytes || found.slice.sizeBytes !== slice.sizeBytes) {
      throw new SafetensorsError(
        'UNKNOWN_TENSOR',
        `the TensorInfo given does not match this model's entry for that name: its slice ${quoteValue(slice)} is not ${quoteValue(found.slice)} (a TensorInfo of another model, or one built by hand?); pass the name or model.getTensor(name)`,
        { file: model.rootDir, tensor: name },
      );
    }
  }
  return found;
}
