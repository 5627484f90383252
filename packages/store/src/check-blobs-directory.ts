// A cache's blobs/ that is not its own directory (a symbolic link, a file): reads go through it
// (verify, inspect, loads: every blob is still checked against this cache's manifest), but nothing
// is written or deleted through it. Blob files are named <contentKey>.bin whatever their encoding
// (chunk size, payload format), and publishing one renames over the name: a build of a cache whose
// blobs/ linked another's, at another chunk size, replaced that cache's blobs with its own encoding
// and each cache's rebuild then "repaired" the other's (review, 2026-12-07). Deleting through it
// removed the other cache's blobs as orphans (gc, fuzz probe 2026-12-07). Hence every writer
// refuses: publishing or repairing a blob, a commit, gc, dropUnboundEntries, recovery.
import type { StorageBackend } from './backend.js';
import { StoreError } from './errors.js';

/** What the root's `blobs` name is, by lstat (links not followed). */
export type BlobsDirectoryKind = 'directory' | 'missing' | 'link' | 'other';

/** Whether a writer may go on: blobs/ is a real directory, or absent (a writer makes it). */
export function isBlobsDirectoryOwn(kind: BlobsDirectoryKind): boolean {
  return kind === 'directory' || kind === 'missing';
}

/**
 * UNSAFE_BLOB_PATH (`details.reason` 'blobs-directory-link' with `details.target`, or
 * 'blobs-directory-not-a-directory') unless the cache's blobs/ is a real directory (or absent).
 * `operation` names the caller in the message (`gc`, `addEntries`, …). Backends without a blobs
 * directory (S3) pass.
 */
export async function checkBlobsDirectoryOwn(backend: StorageBackend, operation: string): Promise<void> {
  if (backend.describeBlobsDirectory === undefined) return;
  const found = await backend.describeBlobsDirectory();
  if (isBlobsDirectoryOwn(found.kind)) return;
  throw blobsDirectoryError(backend.describe('blobs'), found, operation);
}

function blobsDirectoryError(path: string, found: { kind: BlobsDirectoryKind; target?: string }, operation: string): StoreError {
  const link = found.kind === 'link';
  const what = link ? `is a symbolic link${found.target === undefined ? '' : ` (to ${found.target})`}` : 'is not a directory';
  const remedy = link
    ? 'writing or deleting through it would replace or remove another cache\'s blobs (the same content key under another chunk size or payload format; ' +
      'its live blobs as this cache\'s orphans). Reads (verify, inspect, loads) still go through the link. ' +
      'Link the whole cache directory instead (a cache root that is a link works), or copy the blobs into a blobs/ directory of this cache\'s own; ' +
      'to share blobs between models, build them into one cache'
    : 'the store keeps its blobs in a directory there; move the file aside and rebuild (`splitzip build <model> --out <cache> --repair`)';
  return new StoreError('UNSAFE_BLOB_PATH', `${operation} refuses: ${path} ${what}, not this cache's own blobs directory: ${remedy}`, {
    path,
    details: { reason: link ? 'blobs-directory-link' : 'blobs-directory-not-a-directory', operation, ...(found.target === undefined ? {} : { target: found.target }) },
  });
}
