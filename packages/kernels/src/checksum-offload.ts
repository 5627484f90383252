/**
 * Checks payload checksums off the calling thread, so that the webgpu decoder's host thread can
 * copy the payload into the upload buffer at the same time. Node provides one on a worker thread
 * (create-checksum-worker.ts); where there is none the decoder checks on the calling thread.
 */
export interface ChecksumOffload {
  /**
   * Starts checking `payload`'s checksum elsewhere (its header already read and its structure
   * checked); resolves when it matches, rejects with the codec's CHECKSUM_MISMATCH when it does
   * not, or with a KernelsError when the other thread could not run it (the caller then checks
   * itself). Null when this payload cannot be read there (not in shared memory).
   *
   * `gate` (an Int32Array(1) over a SharedArrayBuffer, format v3 only): how many checksum
   * segments the caller has read so far; a segment is hashed only once the gate passed it, so the
   * other threads read what the caller just read (from cache) rather than competing with it for
   * memory. The caller must raise it to the segment count (or more) in the end, failures included.
   */
  verify(payload: Uint8Array, gate?: Int32Array | null): Promise<void> | null;
  /** Stops the other thread; idempotent. */
  dispose(): Promise<void>;
}
