import type { FileHandle } from 'node:fs/promises';
import { SafetensorsError } from './errors.js';
import { MAX_READ_CHUNK_BYTES } from './limits.js';

/**
 * Fills `target` from `position` with positioned reads (short reads are retried; one read never
 * exceeds MAX_READ_CHUNK_BYTES). A file that ends early gives UNEXPECTED_EOF; a failed read (EIO,
 * EISDIR, a closed descriptor) IO_ERROR with its errno code.
 */
export async function readFully(handle: FileHandle, target: Uint8Array, position: number, file: string, tensor?: string): Promise<void> {
  let done = 0;
  const length = target.length;
  while (done < length) {
    const want = Math.min(length - done, MAX_READ_CHUNK_BYTES);
    let bytesRead: number;
    try {
      ({ bytesRead } = await handle.read(target, done, want, position + done));
    } catch (cause) {
      const code = (cause as NodeJS.ErrnoException)?.code ?? 'unknown';
      throw new SafetensorsError('IO_ERROR', `file system error ${code} reading ${want} bytes at ${position + done}: ${cause instanceof Error ? cause.message : typeof cause}`, {
        file,
        ...(tensor !== undefined ? { tensor } : {}),
        offsets: { position: position + done },
        cause,
      });
    }
    if (bytesRead === 0) {
      throw new SafetensorsError('UNEXPECTED_EOF', `file ended at ${position + done} while reading ${length} bytes from ${position} (did it shrink after opening?)`, {
        file,
        ...(tensor !== undefined ? { tensor } : {}),
        offsets: { position: position + done, expected: position + length },
      });
    }
    done += bytesRead;
  }
}
