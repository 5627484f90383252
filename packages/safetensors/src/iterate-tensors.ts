import { checkOptions, optionNamesOf } from './check-options.js';
import { SafetensorsError } from './errors.js';
import { DEFAULT_ITERATE_BUFFER_BYTES } from './limits.js';
import { allocateUninitialized, checkFitsOneBuffer, getModelReader } from './model-reader.js';
import { MAX_BUFFER_BYTES } from './node-limits.js';
import { quoteValue } from './quote-value.js';
import type { SafetensorsModel, TensorInfo } from './types.js';

export interface IterateTensorsOptions {
  /**
   * Bound of one batch of consecutive tensors read with one positioned read (default 16 MiB; at
   * most MAX_BUFFER_BYTES). A tensor larger than this is read alone into a buffer of its own size.
   * At most two batches are held at a time: the one being yielded and the read-ahead.
   */
  maxBufferBytes?: number | undefined;
  /**
   * Reuse two buffers for the whole iteration instead of allocating one per batch. Faster, but each
   * yielded `bytes` view is only valid until the iterator is advanced again.
   */
  reuseBuffers?: boolean | undefined;
  /** Only these tensors (still yielded in file order). */
  filter?: ((tensor: TensorInfo) => boolean) | undefined;
}

export interface TensorWithBytes {
  tensor: TensorInfo;
  /** Over an ordinary ArrayBuffer (never shared): it can be transferred, hashed by crypto.subtle, put in a Blob. */
  bytes: Uint8Array<ArrayBuffer>;
}

const ITERATE_OPTION_NAMES = optionNamesOf<IterateTensorsOptions>({ maxBufferBytes: true, reuseBuffers: true, filter: true });

interface Batch {
  shardName: string;
  shardPath: string;
  positionBytes: number;
  sizeBytes: number;
  tensors: TensorInfo[];
}

/**
 * Yields every tensor with its bytes in file order (shard by shard), with bounded memory: consecutive
 * tensors are grouped into batches of at most `maxBufferBytes`, each read with one positioned read,
 * and the next batch is read while the current one is consumed. A tensor over MAX_BUFFER_BYTES
 * cannot be yielded: every tensor before it is, then the iteration throws TENSOR_TOO_LARGE naming it
 * (a `filter` can leave such tensors out).
 */
export async function* iterateTensors(model: SafetensorsModel, options: IterateTensorsOptions = {}): AsyncGenerator<TensorWithBytes, void, undefined> {
  const reader = getModelReader(model);
  checkOptions(options, ITERATE_OPTION_NAMES, 'iterateTensors');
  const maxBufferBytes = options.maxBufferBytes ?? DEFAULT_ITERATE_BUFFER_BYTES;
  if (!Number.isSafeInteger(maxBufferBytes) || maxBufferBytes < 1) {
    throw new SafetensorsError('INVALID_ARGUMENT', `maxBufferBytes must be a positive integer, got ${quoteValue(maxBufferBytes)}`);
  }
  // No batch of several tensors (nor a reused buffer) may outgrow one buffer; a single tensor that
  // does fails when reached.
  if (options.filter !== undefined && typeof options.filter !== 'function') {
    throw new SafetensorsError('INVALID_ARGUMENT', `filter must be a function, got ${quoteValue(options.filter)}`);
  }
  if (options.reuseBuffers !== undefined && typeof options.reuseBuffers !== 'boolean') {
    throw new SafetensorsError('INVALID_ARGUMENT', `reuseBuffers must be true or false, got ${quoteValue(options.reuseBuffers)}`);
  }
  const batchBound = Math.min(maxBufferBytes, MAX_BUFFER_BYTES);
  const batches = planBatches(model.tensors, batchBound, options.filter);
  const reuse = options.reuseBuffers === true;
  const spare: (Uint8Array<ArrayBuffer> | undefined)[] = [undefined, undefined];
  const reuseBytes = reuse ? Math.min(batchBound, largest(batches)) : 0;

  // A batch read before close() must not be yielded after it (the README's promise: reads after
  // close are MODEL_CLOSED): checked before each step, so an open iterator stops at once.
  const checkOpen = (): void => {
    if (model.closed === true || reader.isClosed?.() === true) {
      throw new SafetensorsError('MODEL_CLOSED', 'model was closed during the iteration', { file: model.rootDir });
    }
  };

  const readBatch = (index: number): Promise<Uint8Array<ArrayBuffer>> => {
    const batch = batches[index] as Batch;
    // Only a batch of one tensor can be this big (see planBatches' bound above).
    if (batch.sizeBytes > MAX_BUFFER_BYTES) checkFitsOneBuffer(batch.tensors[0] as TensorInfo);
    let buffer: Uint8Array<ArrayBuffer>;
    if (reuse) {
      // Two slots alternate: batch k+1 is read into one while batch k is consumed from the other.
      const slot = index & 1;
      const current = spare[slot];
      if (current && current.length >= batch.sizeBytes) {
        buffer = current;
      } else {
        if (current) reader.giveBackBuffer(current);
        buffer = reader.takeBuffer(Math.max(batch.sizeBytes, reuseBytes));
        spare[slot] = buffer;
      }
    } else {
      buffer = allocateUninitialized(batch.sizeBytes);
    }
    const view = buffer.subarray(0, batch.sizeBytes);
    return reader.readAt(batch.shardName, view, batch.positionBytes).then(() => view);
  };

  const startRead = (index: number): Promise<Uint8Array<ArrayBuffer>> => {
    let read: Promise<Uint8Array<ArrayBuffer>>;
    try {
      read = readBatch(index);
    } catch (error) {
      // Thrown while starting the read-ahead of batch k+1: it must surface when that batch is
      // reached, after batch k has been yielded, not before.
      read = Promise.reject(error);
    }
    // A read-ahead may fail while the consumer is busy elsewhere: mark it handled now (it is still
    // rethrown when awaited) so Node never reports an unhandled rejection.
    read.catch(() => undefined);
    return read;
  };

  let pending: Promise<Uint8Array<ArrayBuffer>> | undefined = batches.length > 0 ? startRead(0) : undefined;
  try {
    for (let b = 0; b < batches.length; b++) {
      const bytes = await (pending as Promise<Uint8Array<ArrayBuffer>>);
      checkOpen();
      // Read-ahead: the next batch goes into the other buffer while this one is consumed.
      pending = b + 1 < batches.length ? startRead(b + 1) : undefined;
      const batch = batches[b] as Batch;
      for (const tensor of batch.tensors) {
        checkOpen();
        const start = tensor.slice.offsetBytes - batch.positionBytes;
        yield { tensor, bytes: bytes.subarray(start, start + tensor.slice.sizeBytes) };
      }
    }
  } finally {
    // An abandoned iteration must not leave a read rejecting unobserved.
    if (pending) await pending.catch(() => undefined);
    for (const buffer of spare) if (buffer) reader.giveBackBuffer(buffer);
    spare.fill(undefined);
  }
}

/**
 * `filter`'s verdict on `tensor`. One that returns a promise (an async function) is refused: a
 * promise is truthy, so every tensor was read whatever it would have decided.
 */
function keepTensor(filter: (tensor: TensorInfo) => boolean, tensor: TensorInfo): boolean {
  const keep: unknown = filter(tensor);
  const then = (keep as { then?: unknown } | null | undefined)?.then;
  if (typeof then !== 'function') return Boolean(keep);
  try {
    // Not waited for: its rejection must not go unhandled.
    (keep as PromiseLike<unknown>).then(undefined, () => undefined);
  } catch {
    // A `then` that throws leaves nothing pending.
  }
  throw new SafetensorsError('INVALID_ARGUMENT', 'filter returned a promise: it must decide synchronously (return true or false, not an async function)', { tensor: tensor.name });
}

function planBatches(tensors: readonly TensorInfo[], maxBufferBytes: number, filter?: (tensor: TensorInfo) => boolean): Batch[] {
  const batches: Batch[] = [];
  let current: Batch | undefined;
  for (const tensor of tensors) {
    if (filter && !keepTensor(filter, tensor)) {
      current = undefined; // a skipped tensor breaks contiguity
      continue;
    }
    const { shardName, offsetBytes, sizeBytes } = tensor.slice;
    if (
      current &&
      current.shardName === shardName &&
      current.positionBytes + current.sizeBytes === offsetBytes &&
      current.sizeBytes + sizeBytes <= maxBufferBytes
    ) {
      current.sizeBytes += sizeBytes;
      current.tensors.push(tensor);
      continue;
    }
    current = { shardName, shardPath: tensor.shardPath, positionBytes: offsetBytes, sizeBytes, tensors: [tensor] };
    batches.push(current);
  }
  return batches;
}

function largest(batches: readonly Batch[]): number {
  let max = 0;
  for (const batch of batches) if (batch.sizeBytes > max) max = batch.sizeBytes;
  return max;
}
