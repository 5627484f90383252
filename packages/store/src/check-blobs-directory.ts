// A cache's blobs/ that is not its own directory (a symbolic link, a file): reads go through it (blobs
// on another disk are legitimate: every blob is still checked against this cache's manifest), but
// nothing is deleted through it. A link to another cache's blobs/ made gc remove that cache's blobs
// as orphans (they are no entry of this manifest), and `verify` of the other cache then failed
// BLOB_MISSING (fuzz probe, 2026-12-07).
import type { StorageBackend } from './backend.js';
import { StoreError } from './errors.js';

/** What the root's `blobs` name is, by lstat (links not followed). */
export type BlobsDirectoryKind = 'directory' | 'missing' | 'link' | 'other';

/** What a caller that deletes in blobs/ may do there: anything but 'directory' and 'missing' refuses. */
export function isBlobsDirectoryDeletable(kind: BlobsDirectoryKind): boolean {
  return kind === 'directory' || kind === 'missing';
}

/**
 * UNSAFE_BLOB_PATH (`details.reason` 'blobs-directory-link' or 'blobs-directory-not-a-directory')
 * unless the cache's blobs/ is a real directory (or absent: nothing there to delete). `operation`
 * names the caller in the message (`gc`, `dropUnboundEntries`).
 */
export async function checkBlobsDirectoryDeletable(backend: StorageBackend, operation: string): Promise<void> {
  if (backend.describeBlobsDirectory === undefined) return;
  const found = await backend.describeBlobsDirectory();
  if (isBlobsDirectoryDeletable(found.kind)) return;
  throw blobsDirectoryError(backend.describe('blobs'), found, operation);
}

export function blobsDirectoryError(path: string, found: { kind: BlobsDirectoryKind; target?: string }, operation: string): StoreError {
  const link = found.kind === 'link';
  const what = link ? `is a symbolic link${found.target === undefined ? '' : ` (to ${found.target})`}` : 'is not a directory';
  const remedy = link
    ? 'the files there may be another cache\'s blobs, which are no entries of this manifest and would be removed as orphans. ' +
      'Reads, builds and loads still go through the link; to delete, run it on the cache that owns that directory, or make blobs/ this cache\'s own directory ' +
      '(remove the link and move the directory it names here, if no other cache uses it)'
    : 'the store keeps its blobs in a directory there; move the file aside and rebuild (`splitzip build <model> --out <cache> --repair`)';
  return new StoreError('UNSAFE_BLOB_PATH', `${operation} refuses: ${path} ${what}, not this cache's own blobs directory: ${remedy}`, {
    path,
    details: { reason: link ? 'blobs-directory-link' : 'blobs-directory-not-a-directory', operation, ...(found.target === undefined ? {} : { target: found.target }) },
  });
}
