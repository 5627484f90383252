// Reads of parts of one blob, for checks that must not hold a large payload whole (verify).
import type { StorageBackend } from './backend.js';

/** An open blob read a part at a time; `close` once done (never throws). */
export interface BlobRangeReader {
  /** Reads exactly `target.length` bytes from `position`; the blob's errors as readBlobInto's. */
  read(target: Uint8Array, position: number): Promise<void>;
  close(): Promise<void>;
}

/** A backend that can open a blob for ranged reads (the file-system one; S3 reads whole objects). */
export interface BlobRangeSource {
  /**
   * Opens an entry's blob with readBlobInto's checks (canonical path, no links, a regular file of
   * exactly `expectedBytes`) and errors, for reads of its parts.
   */
  openBlobRanges?(key: string, blob: string, expectedBytes: number): Promise<BlobRangeReader>;
}

/** The backend verify reads blobs through. */
export type VerifyBackend = Pick<StorageBackend, 'readBlobInto' | 'checkBlob'> &
  BlobRangeSource & {
    /** Entries verify checks at once through it; VERIFY_CONCURRENCY when not given. */
    readonly verifyConcurrency?: number | undefined;
  };
