import type { FileHandle } from 'node:fs/promises';
import { open, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { commitTemporaryFile, discardTemporaryFile, temporaryPathFor, writeFully } from './atomic-file.js';
import { SafetensorsError } from './errors.js';
import { serializeSafetensorsHeader, type SerializedHeader } from './serialize-safetensors-header.js';
import type { TensorSpec } from './types.js';
import { checkByteArray } from './check-byte-array.js';
import { checkOptions, optionNamesOf } from './check-options.js';
import { quoteValue } from './quote-value.js';
import { rethrowIo } from './rethrow-io.js';

export interface SafetensorsWriterOptions {
  metadata?: Readonly<Record<string, string>> | null | undefined;
}

/** A streaming writer: the header is fixed up front, the tensors' bytes arrive in order. */
export interface SafetensorsWriter {
  readonly path: string;
  /** The header written (tensors with their data_offsets). */
  readonly header: SerializedHeader;
  /** Data bytes received so far (of header.dataBytes). */
  readonly writtenDataBytes: number;
  /** Appends data; WRITE_SIZE_MISMATCH (and the temp file removed) if it goes past the announced size. */
  write(chunk: Uint8Array): Promise<void>;
  /** Checks the size, fsyncs, renames into place, fsyncs the directory. */
  close(): Promise<void>;
  /** Removes the temp file; the destination is left as it was. Idempotent. */
  abort(): Promise<void>;
}

export const WRITER_OPTION_NAMES = optionNamesOf<SafetensorsWriterOptions>({ metadata: true });

/** Small writes are gathered into one buffer of this size before reaching the file. */
const COALESCE_BYTES = 4 << 20;

/**
 * Starts an atomic streaming write of a safetensors file: a temp file in the destination's directory
 * receives the header, then the data via write(); close() commits (fsync, rename, fsync dir). Until
 * then the destination is untouched; on any failure the temp file is removed.
 */
export async function createSafetensorsWriter(path: string, specs: readonly TensorSpec[], options: SafetensorsWriterOptions = {}): Promise<SafetensorsWriter> {
  if (typeof path !== 'string') throw new SafetensorsError('INVALID_ARGUMENT', `path must be a string, got ${quoteValue(path)}`);
  const absolute = resolve(path);
  checkOptions(options, WRITER_OPTION_NAMES, 'createSafetensorsWriter', absolute);
  const header = serializeSafetensorsHeader(specs, options.metadata ?? null, absolute);
  // Refused before anything is written (the rename at the end failed with a raw EISDIR).
  const existing = await stat(absolute).catch(() => undefined);
  if (existing?.isDirectory()) throw new SafetensorsError('IO_ERROR', 'destination is a directory (EISDIR)', { file: absolute });
  const temporaryPath = temporaryPathFor(absolute);
  // A missing directory was a raw ENOENT naming the temp file: IO_ERROR names the destination.
  let handle: FileHandle | undefined = await open(temporaryPath, 'wx').catch((cause: unknown) => rethrowIo(cause, absolute));
  let state: 'open' | 'closed' | 'aborted' = 'open';
  let written = 0;
  let position = 0;
  const pending = new Uint8Array(Math.min(COALESCE_BYTES, Math.max(header.dataBytes, 1)));
  let pendingBytes = 0;

  const flush = async (): Promise<void> => {
    if (pendingBytes === 0) return;
    await writeFully(handle as FileHandle, pending.subarray(0, pendingBytes), position);
    position += pendingBytes;
    pendingBytes = 0;
  };
  const abort = async (): Promise<void> => {
    if (state !== 'open') return;
    state = 'aborted';
    await discardTemporaryFile(handle, temporaryPath);
    handle = undefined;
  };
  const guard = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      await abort();
      return rethrowIo(error, absolute);
    }
  };
  let busy = false;
  const assertOpen = (): void => {
    if (state !== 'open') throw new SafetensorsError('WRITER_CLOSED', `writer is ${state}`, { file: absolute });
    // Bytes must arrive in order: a second call while one is in flight is a caller bug.
    if (busy) throw new SafetensorsError('INVALID_ARGUMENT', 'write() or close() called before the previous call finished', { file: absolute });
  };
  const exclusive = async <T>(work: () => Promise<T>): Promise<T> => {
    busy = true;
    try {
      return await guard(work);
    } finally {
      busy = false;
    }
  };

  await guard(async () => {
    await writeFully(handle as FileHandle, header.bytes, 0);
    position = header.bytes.length;
  });

  return {
    path: absolute,
    header,
    get writtenDataBytes() {
      return written;
    },
    write: async (chunk: Uint8Array) => {
      assertOpen();
      checkByteArray(chunk, 'a data chunk', absolute);
      await exclusive(async () => {
        if (written + chunk.length > header.dataBytes) {
          throw new SafetensorsError('WRITE_SIZE_MISMATCH', `got ${written + chunk.length} data bytes, the header announced ${header.dataBytes}`, {
            file: absolute,
            offsets: { expected: header.dataBytes, actual: written + chunk.length },
          });
        }
        written += chunk.length;
        if (chunk.length >= pending.length) {
          await flush();
          await writeFully(handle as FileHandle, chunk, position);
          position += chunk.length;
          return;
        }
        let from = 0;
        while (from < chunk.length) {
          const take = Math.min(pending.length - pendingBytes, chunk.length - from);
          pending.set(chunk.subarray(from, from + take), pendingBytes);
          pendingBytes += take;
          from += take;
          if (pendingBytes === pending.length) await flush();
        }
      });
    },
    close: async () => {
      assertOpen();
      await exclusive(async () => {
        if (written !== header.dataBytes) {
          throw new SafetensorsError('WRITE_SIZE_MISMATCH', `got ${written} data bytes, the header announced ${header.dataBytes}`, {
            file: absolute,
            offsets: { expected: header.dataBytes, actual: written },
          });
        }
        await flush();
        await commitTemporaryFile(handle as FileHandle, temporaryPath, absolute);
        handle = undefined;
        state = 'closed';
      });
    },
    abort,
  };
}
