// A directory cache's backend that copies the cache as a crash would leave it before and after each
// file operation of a compaction (the next journal's creation, an append, the manifest's write, the
// old journal's and a blob's removal): what the crash tests of unbindSlices and dropUnboundEntries
// open and check, step by step.
import { cp } from 'node:fs/promises';
import type { JournalFile, ListedFile } from '../src/backend.js';
import { FsBackend } from '../src/fs-backend.js';
import { trackTempDir } from './helpers.js';

export interface CrashCopy {
  /** Where the copy was taken: `before|after <operation>`. */
  step: string;
  path: string;
}

/**
 * A backend for the cache at `root` and the copies it takes, in order (`<root>-crash-<n>`). The dead
 * writer's lock is left out of each copy: the next writer recovers it, as after a real crash.
 */
export function createCrashCopyBackend(root: string): { backend: FsBackend; copies: CrashCopy[] } {
  const copies: CrashCopy[] = [];
  const crashHere = async (step: string): Promise<void> => {
    const path = `${root}-crash-${copies.length}`;
    // Removed with the temp dirs: slice-bindings-crash left its copies in the temp dir at every run.
    trackTempDir(path);
    await cp(root, path, { recursive: true, filter: (source) => !source.endsWith('/lock') });
    copies.push({ step, path });
  };
  let removals: Promise<void> = Promise.resolve();
  class CrashPoints extends FsBackend {
    override async openJournal(generation: number): Promise<JournalFile | undefined> {
      const journal = await super.openJournal(generation);
      if (!journal) return journal;
      const append = journal.append.bind(journal);
      journal.append = async (offsetBytes, bytes) => {
        await crashHere(`before appending ${bytes.length} bytes to journal.${generation}`);
        await append(offsetBytes, bytes);
        await crashHere(`after appending to journal.${generation}`);
      };
      return journal;
    }

    override async createJournal(generation: number, header: Uint8Array): Promise<void> {
      await crashHere(`before creating journal.${generation}`);
      await super.createJournal(generation, header);
      await crashHere(`after creating journal.${generation}`);
    }

    override async writeManifest(bytes: Uint8Array): Promise<void> {
      await crashHere('before writing the manifest');
      await super.writeManifest(bytes);
      await crashHere('after writing the manifest');
    }

    override async removeJournal(generation: number): Promise<void> {
      await crashHere(`before removing journal.${generation}`);
      await super.removeJournal(generation);
      await crashHere(`after removing journal.${generation}`);
    }

    override removeFile(file: ListedFile): Promise<void> {
      // The store unlinks blobs a few at once: taken one removal at a time (in the order they
      // start), each copy is the cache between two whole steps, and the steps come in order.
      const removed = removals.then(async () => {
        await crashHere(`before removing ${file.dir}/${file.name.slice(0, 8)}`);
        await super.removeFile(file);
        await crashHere(`after removing ${file.dir}/${file.name.slice(0, 8)}`);
      });
      removals = removed.catch(() => undefined);
      return removed;
    }
  }
  return { backend: new CrashPoints(root), copies };
}
