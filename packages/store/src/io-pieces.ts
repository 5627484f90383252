import { MAX_IO_PIECE_BYTES } from './limits.js';

/** A positioned read (fs.read, FileHandle.read or readSync): bytes read into `target[offset..]`, 0 at the end of the file. */
export type ReadAt = (target: Uint8Array, offset: number, length: number, position: number) => Promise<number>;
export type ReadAtSync = (target: Uint8Array, offset: number, length: number, position: number) => number;
/** A positioned write (`position` null: at the file's current position). */
export type WriteAt = (source: Uint8Array, offset: number, length: number, position: number | null) => Promise<number>;

/**
 * Reads from file position `position` into all of `target` or until the end of the file, never
 * asking for more than `pieceBytes` at once (MAX_IO_PIECE_BYTES: see there). Returns the bytes read.
 */
export async function readFully(read: ReadAt, target: Uint8Array, position: number, pieceBytes = MAX_IO_PIECE_BYTES): Promise<number> {
  let done = 0;
  while (done < target.length) {
    const bytesRead = await read(target, done, Math.min(target.length - done, pieceBytes), position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

/** readFully with a synchronous read. */
export function readFullySync(read: ReadAtSync, target: Uint8Array, position: number, pieceBytes = MAX_IO_PIECE_BYTES): number {
  let done = 0;
  while (done < target.length) {
    const bytesRead = read(target, done, Math.min(target.length - done, pieceBytes), position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

/** Writes all of `source` at `position` (null: the current position), in pieces of at most `pieceBytes`. */
export async function writeFully(write: WriteAt, source: Uint8Array, position: number | null, pieceBytes = MAX_IO_PIECE_BYTES): Promise<void> {
  let done = 0;
  while (done < source.length) {
    done += await write(source, done, Math.min(source.length - done, pieceBytes), position === null ? null : position + done);
  }
}
