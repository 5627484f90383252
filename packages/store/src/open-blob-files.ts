import { closeSync } from 'node:fs';

/**
 * Blob files kept open between reads (FsBackend's readBlobIntoSync, readBlobInto and openBlobSync), process-wide.
 * Opening a blob with its checks and closing it again costs three system calls (open, fstat,
 * close: ~50 µs together on these VMs), which for the small blobs read this way is as much as
 * the read itself: a page-cache load of the default model spent ~1.1 of 5.5 ms in them. Bounded
 * for the whole process, whatever number of stores are open and whether they are closed: 256
 * covers every blob of the 1.07 GB benchmark model (102) and of most models up to a few billion
 * parameters (one blob per tensor), far below the descriptor limits Node runs with (it raises the
 * soft limit to the hard one, thousands at least on current Linux distributions). A load that
 * sweeps more blobs than this reopens them, as before.
 */
export const MAX_OPEN_BLOB_FILES = 256;

interface OpenBlobFile {
  fd: number;
  /** The size the file was checked to have when it was opened. */
  sizeBytes: number;
}

/** By real path; a Map iterates in insertion order, so the least recently used comes first. */
const openFiles = new Map<string, OpenBlobFile>();

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Already closed or never valid: nothing to give back.
  }
}

/**
 * Takes the kept descriptor of `resolvedPath` if it was opened for a file of `sizeBytes`; the
 * caller owns it until it gives it back (keepOpenBlobFile) or closes it. Undefined: open it anew.
 */
export function takeOpenBlobFile(resolvedPath: string, sizeBytes: number): number | undefined {
  const held = openFiles.get(resolvedPath);
  if (held === undefined) return undefined;
  openFiles.delete(resolvedPath);
  if (held.sizeBytes === sizeBytes) return held.fd;
  closeQuietly(held.fd);
  return undefined;
}

/** Keeps `fd` (a checked blob file of `sizeBytes`) for the next read, closing the least recently used past the bound. */
export function keepOpenBlobFile(resolvedPath: string, fd: number, sizeBytes: number): void {
  const previous = openFiles.get(resolvedPath);
  if (previous !== undefined && previous.fd !== fd) closeQuietly(previous.fd);
  openFiles.delete(resolvedPath);
  openFiles.set(resolvedPath, { fd, sizeBytes });
  for (const [path, oldest] of openFiles) {
    if (openFiles.size <= MAX_OPEN_BLOB_FILES) break;
    openFiles.delete(path);
    closeQuietly(oldest.fd);
  }
}

/** Closes the kept descriptor of one blob, if any (its bytes failed a check, or it was removed). */
export function forgetOpenBlobFile(resolvedPath: string): void {
  const held = openFiles.get(resolvedPath);
  if (held === undefined) return;
  openFiles.delete(resolvedPath);
  closeQuietly(held.fd);
}

/** Closes the kept descriptors of the paths `matches` selects (a closed store's). */
export function forgetOpenBlobFiles(matches: (resolvedPath: string) => boolean): void {
  for (const [path, held] of openFiles) {
    if (!matches(path)) continue;
    openFiles.delete(path);
    closeQuietly(held.fd);
  }
}

/** Descriptors kept now (for tests and diagnostics). */
export function countOpenBlobFiles(): number {
  return openFiles.size;
}
