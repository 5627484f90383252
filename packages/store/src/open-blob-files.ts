import { closeSync, readFileSync } from 'node:fs';
import { KEPT_BLOB_FILES_DESCRIPTOR_SHARE, MIN_KEPT_BLOB_FILES } from './limits.js';

/**
 * Blob files kept open between reads (FsBackend's readBlobIntoSync, readBlobInto and openBlobSync), process-wide.
 * Opening a blob with its checks and closing it again costs three system calls (open, fstat,
 * close: ~50 µs together on these VMs), which for the small blobs read this way is as much as
 * the read itself: a page-cache load of the default model spent ~1.1 of 5.5 ms in them. Bounded
 * for the whole process, whatever number of stores are open and whether they are closed: 256
 * covers every blob of the 1.07 GB benchmark model (102) and of most models up to a few billion
 * parameters (one blob per tensor), far below the descriptor limits Node runs with (it raises the
 * soft limit to the hard one, thousands at least on current Linux distributions); under a lower
 * limit, an eighth of it (keptBlobFilesLimit). A load that sweeps more blobs than this reopens
 * them, as before.
 */
export const MAX_OPEN_BLOB_FILES = 256;

/** Linux's soft RLIMIT_NOFILE (Node has raised it to the hard limit by now); undefined elsewhere. */
function readDescriptorLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return line === null ? undefined : Number(line[1]);
  } catch {
    return undefined;
  }
}

/** How many descriptors are kept at most now: MAX_OPEN_BLOB_FILES within the limit's share, halved each time descriptors ran out. */
let keptLimit = (() => {
  const limit = readDescriptorLimit();
  return limit === undefined ? MAX_OPEN_BLOB_FILES : Math.max(MIN_KEPT_BLOB_FILES, Math.min(MAX_OPEN_BLOB_FILES, Math.floor(limit * KEPT_BLOB_FILES_DESCRIPTOR_SHARE)));
})();

interface OpenBlobFile {
  fd: number;
  /** The size the file was checked to have when it was opened. */
  sizeBytes: number;
}

/** By real path; a Map iterates in insertion order, so the least recently used comes first. */
const openFiles = new Map<string, OpenBlobFile>();

/** Closes a read-only descriptor; a failing close (EIO, EBADF) loses nothing, so it must not replace the caller's result or error. */
export function closeQuietly(fd: number): void {
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
    if (openFiles.size <= keptLimit) break;
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

/** Whether an open failed for want of descriptors (this process's, or the whole system's). */
function isOutOfDescriptors(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'EMFILE' || code === 'ENFILE';
}

/** Bumped by every shed: an open that failed for want of descriptors tries again if one came since it started. */
let shedCount = 0;

/** Closes every kept descriptor; with `halve`, keeps at most half as many from now on. */
function shedOpenBlobFiles(halve: boolean): void {
  if (halve) keptLimit = Math.max(MIN_KEPT_BLOB_FILES, Math.floor(keptLimit / 2));
  for (const held of openFiles.values()) closeQuietly(held.fd);
  openFiles.clear();
  shedCount += 1;
}

/**
 * After `open` failed with `error`: whether to run it again. Out of descriptors, it closes what is
 * kept; the bound is halved only by the first open of a burst to run out (one that started after
 * the last shed): the others, and reads that put descriptors back meanwhile, halved it again each
 * (256 to 16 in one burst).
 */
function shedForRetry(error: unknown, shedBefore: number): boolean {
  if (!isOutOfDescriptors(error)) return false;
  const shedSince = shedCount !== shedBefore;
  if (openFiles.size > 0) {
    shedOpenBlobFiles(!shedSince);
    return true;
  }
  return shedSince;
}

/**
 * Runs `open` (of a blob file); where the process is out of descriptors, the kept ones, only a
 * speed-up, are closed and it runs once more. Before, they were never given back: every later open
 * in the process failed, blob reads, model shards and the writer lock alike.
 */
export function openSheddingKept(open: () => number): number {
  const shedBefore = shedCount;
  try {
    return open();
  } catch (error) {
    if (!shedForRetry(error, shedBefore)) throw error;
    return open();
  }
}

/** openSheddingKept for an asynchronous open (opens in flight together: each that ran out tries again after a shed). */
export async function openSheddingKeptAsync(open: () => Promise<number>): Promise<number> {
  const shedBefore = shedCount;
  try {
    return await open();
  } catch (error) {
    if (!shedForRetry(error, shedBefore)) throw error;
    return open();
  }
}

/** How many blob descriptors are kept at most now (MAX_OPEN_BLOB_FILES, less under a low descriptor limit). */
export function keptBlobFilesLimit(): number {
  return keptLimit;
}

/** Descriptors kept now (for tests and diagnostics). */
export function countOpenBlobFiles(): number {
  return openFiles.size;
}
