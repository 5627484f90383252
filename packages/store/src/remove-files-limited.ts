// Unlinking a list of cache files a few at once (dropUnboundEntries' blobs, gc's leftovers) with the
// outcome a loop awaiting each in turn has: which failed, in the list's order, or its first error.
import type { ListedFile, StorageBackend } from './backend.js';
import { forEachLimited } from './for-each-limited.js';
import { MAX_CONCURRENT_UNLINKS } from './limits.js';

export interface RemoveFilesOptions {
  /**
   * `true`: once a removal fails, no later file's removal starts (those running end), and the error
   * of the first file in the list's order that failed is thrown, as a loop awaiting each removal in
   * turn throws it (every file before that one removed). `false`: every file is tried.
   */
  stopAtFailure: boolean;
}

/**
 * Removes `files` through `backend.removeFile`, started in their order, at most
 * MAX_CONCURRENT_UNLINKS at once. Resolves, in the files' order, whether each removal failed (its
 * error caught); with `stopAtFailure` it rejects instead at the first failure in that order.
 */
export async function removeFilesLimited(backend: StorageBackend, files: readonly ListedFile[], options: RemoveFilesOptions): Promise<boolean[]> {
  const failures: ({ error: unknown } | undefined)[] = new Array(files.length).fill(undefined);
  let stopped = false;
  await forEachLimited(
    files.length,
    MAX_CONCURRENT_UNLINKS,
    async (index) => {
      // Started after a failure before it (in flight when this one's turn came): the loop had
      // stopped there, so this file is not touched.
      if (stopped) return;
      try {
        await backend.removeFile(files[index]!);
      } catch (error) {
        failures[index] = { error };
        if (options.stopAtFailure) stopped = true;
      }
    },
    (index) => {
      // In index order: the first failure in the list's order is the one thrown, whichever ended first.
      const failure = failures[index];
      if (failure !== undefined && options.stopAtFailure) throw failure.error;
    },
  );
  return failures.map((failure) => failure !== undefined);
}
