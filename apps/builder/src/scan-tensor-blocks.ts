// One pass over a BF16 tensor's bytes, a block at a time: its content key (SHA-1 over the store's
// prefix, then the bytes: the key streams), its exponent histogram where asked, and a comparison
// with an entry's payload decoded block by block (the codec's decodeRange). verify --model held
// the file's bytes and the decoded tensor whole beside the payload: 11.6 GB for a 4 GiB tensor.
import { createHash } from 'node:crypto';
import { countExponents, decodeRange } from '@splitzip/codec';
import { formatContentKeyPrefix, updateHash } from '@splitzip/store';
import { viewBf16 } from './tensor-tasks.js';
import { throwIfInterrupted } from './throw-if-interrupted.js';

/** The decoded payload against the file: equal, the first value that differs, or the decode's error. */
export type DecodedComparison =
  | { readonly kind: 'same' }
  | { readonly kind: 'differs'; readonly index: number; readonly fileValue: number; readonly decodedValue: number }
  | { readonly kind: 'error'; readonly error: unknown };

export interface TensorScan {
  key: string;
  /** The exponent histogram, when asked for. */
  histogram: Uint32Array | null;
  /** Against `payload`, when one was given. */
  comparison: DecodedComparison | null;
  /** Blocks the tensor took (0 for an empty one). */
  blocks: number;
}

export interface ScanBuffers {
  /** Two blocks of the file's bytes (each at least blockBytes): one is hashed and compared while the next is read. */
  readonly file: readonly [Uint8Array, Uint8Array];
  /** One block of decoded values (at least blockBytes / 2). */
  readonly decoded: Uint16Array;
}

export interface ScanTensorOptions {
  /** Bytes per block: even, so that a block holds whole values. */
  blockBytes: number;
  buffers: ScanBuffers;
  /** Fills `target` with the tensor's bytes from `fromBytes` and returns it. */
  read(fromBytes: number, target: Uint8Array): Promise<Uint8Array>;
  histogram?: boolean | undefined;
  /** A payload the store has read and checked (header, checksum): decoded and compared block by block. */
  payload?: Uint8Array | undefined;
  signal?: AbortSignal | undefined;
  /** After each block but the last (the caller reports the tensor done), with the bytes done so far. */
  onBlock?: ((doneBytes: number) => void) | undefined;
}

/** Scans a BF16 tensor of `shape` and `sizeBytes` (see ScanTensorOptions). */
export async function scanTensorBlocks(shape: readonly number[], sizeBytes: number, options: ScanTensorOptions): Promise<TensorScan> {
  const { blockBytes, buffers, payload } = options;
  const hash = createHash('sha1').update(formatContentKeyPrefix(shape, 'BF16', sizeBytes), 'utf8');
  const histogram = options.histogram === true ? new Uint32Array(256) : null;
  // undefined: equal so far. Past a difference or an error the payload is not decoded further.
  let comparison: DecodedComparison | undefined;
  // An empty payload still has an escape index to check (decodeRange of no values does).
  if (payload !== undefined && sizeBytes === 0) comparison = compareBlock(payload, 0, new Uint16Array(0), buffers.decoded);
  const readBlock = (from: number, turn: number): Promise<Uint8Array> => {
    const pending = options.read(from, buffers.file[turn]!.subarray(0, Math.min(blockBytes, sizeBytes - from)));
    pending.catch(() => {}); // awaited below, or in `finally` when the loop stops first
    return pending;
  };
  let next = sizeBytes > 0 ? readBlock(0, 0) : undefined;
  let blocks = 0;
  try {
    for (let from = 0; from < sizeBytes; from += blockBytes) {
      const bytes = await next!;
      const to = from + bytes.length;
      // The next block is read while this one is hashed and compared.
      next = to < sizeBytes ? readBlock(to, (blocks + 1) % 2) : undefined;
      updateHash(hash, bytes);
      const values = viewBf16(bytes);
      if (histogram !== null) countExponents(values, histogram);
      if (payload !== undefined && comparison === undefined) comparison = compareBlock(payload, from / 2, values, buffers.decoded);
      blocks++;
      if (to < sizeBytes) {
        options.onBlock?.(to);
        throwIfInterrupted(options.signal);
      }
    }
  } finally {
    // A read still in flight must end before its buffer serves the next tensor.
    await next?.catch(() => {});
  }
  return { key: hash.digest('hex'), histogram, comparison: payload === undefined ? null : (comparison ?? { kind: 'same' }), blocks };
}

/** Decodes the payload's values [start, start + file.length) and compares them with the file's. */
function compareBlock(payload: Uint8Array, start: number, file: Uint16Array, decodedBuffer: Uint16Array): DecodedComparison | undefined {
  let decoded: Uint16Array;
  try {
    // The store checked the checksum when it read the payload: not again per block.
    decoded = decodeRange(payload, start, file.length, decodedBuffer.subarray(0, file.length), { verify: false });
  } catch (error) {
    return { kind: 'error', error };
  }
  const a = Buffer.from(decoded.buffer, decoded.byteOffset, decoded.byteLength);
  const b = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  if (a.equals(b)) return undefined;
  let i = 0;
  while (decoded[i] === file[i]) i++;
  return { kind: 'differs', index: start + i, fileValue: file[i]!, decodedValue: decoded[i]! };
}
