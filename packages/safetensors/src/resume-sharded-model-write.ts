import { lstat, readdir, rename } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { syncDirectory, writeFileAtomic } from './atomic-file.js';
import { checkRemovalsInside } from './check-removal-inside.js';
import { acquireCommitLock, isStaleLockName } from './commit-lock.js';
import { commitRecordNameFor, isCommitWriterAlive, listCommitRecords, markCommitSettled, newWriterId, readCommitRecord, type CommitRecord } from './commit-record.js';
import { checkFileNameOption, observeCommitStep, unlinkIfPresent, type ShardedModelResult } from './create-sharded-model-writer.js';
import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';
import { rethrowIo } from './rethrow-io.js';

export interface ResumeShardedModelWriteOptions {
  /** The interrupted write's indexFileName; needed only where the directory holds several commit records. */
  indexFileName?: string | undefined;
  /**
   * The caller knows that no writer or resume of this directory runs (its pid, alive on this host, is
   * another process now): without it, a record whose writer's pid is alive here is COMMIT_IN_PROGRESS,
   * and so is a commit lock whose taker is alive or cannot be seen; with it, the lock is broken.
   */
  writerStopped?: boolean | undefined;
}

/**
 * Finishes the commit of a sharded writer that was killed (or failed: WRITE_INCOMPLETE) after it wrote
 * its commit record: under the commit lock, removes the old files still there, renames each staged
 * shard still under its temp name into place, writes the index atomically, removes every temp of the
 * index and record, removes the record, fsyncs the directory. Everything is checked first (the
 * record's fields, every staged shard under its temp name or in place as that very file, with its
 * recorded size): a failure there changes nothing. Idempotent; safe to kill at any step and run
 * again. Returns what close() would have.
 */
export async function resumeShardedModelWrite(dir: string, options: ResumeShardedModelWriteOptions = {}): Promise<ShardedModelResult> {
  if (typeof dir !== 'string') throw new SafetensorsError('INVALID_ARGUMENT', `dir must be a path, got ${quoteValue(dir)}`);
  if (options === null || typeof options !== 'object') throw new SafetensorsError('INVALID_ARGUMENT', `options must be an object, got ${quoteValue(options)}`);
  const root = resolve(dir);
  let recordName: string;
  if (options.indexFileName !== undefined) {
    recordName = commitRecordNameFor(checkFileNameOption(options.indexFileName, 'indexFileName'));
  } else {
    const names = await listCommitRecords(root);
    if (names.length > 1) {
      throw new SafetensorsError('INVALID_ARGUMENT', `the directory holds several commit records (${names.join(', ')}): pass the interrupted write's indexFileName`, { file: root });
    }
    recordName = names[0] ?? commitRecordNameFor('model.safetensors.index.json');
  }
  const recordPath = join(root, recordName);
  const readRecord = () =>
    readCommitRecord(recordPath, recordName).catch((error: unknown) => {
      const code = (error as NodeJS.ErrnoException)?.code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        throw new SafetensorsError('COMMIT_RECORD_MISSING', `no commit record ${quoteValue(recordName)}: there is no interrupted sharded write to resume (a finished one removes its record)`, { file: recordPath, cause: error });
      }
      return rethrowIo(error, recordPath);
    });
  const refuseLiveWriter = (record: CommitRecord): void => {
    if (options.writerStopped !== true && isCommitWriterAlive(record)) {
      throw new SafetensorsError(
        'COMMIT_IN_PROGRESS',
        `the writer of this commit (pid ${record.pid}) still runs on this host: it may be committing now; pass { writerStopped: true } if that pid is another process`,
        { file: recordPath },
      );
    }
  };
  const first = await readRecord();
  refuseLiveWriter(first);
  const resumeId = newWriterId();
  // Two resumes at once (or a resume beside a committing writer) removed each other's new files as
  // old ones: everything from here on runs under the commit lock, on the record read under it.
  const lock = await acquireCommitLock(root, first.indexFileName, resumeId, options.writerStopped === true);
  try {
    const record = await readRecord();
    refuseLiveWriter(record);
    return await finishCommit(root, record, recordPath);
  } finally {
    await lock.release();
    markCommitSettled(resumeId);
  }
}

async function finishCommit(root: string, record: CommitRecord, recordPath: string): Promise<ShardedModelResult> {
  const indexPath = join(root, record.indexFileName);
  const shardPaths = record.shards.map((shard) => join(root, shard.name));
  try {
    // Everything that can fail is checked before the first removal: every old file to remove lies
    // inside the directory (no linked directory on its path) and can be looked at; each staged
    // shard is under its temp name or, its temp gone, in place: the very file (its inode) with its size.
    await checkRemovalsInside(root, record.remove, recordPath);
    const presentOld: string[] = [];
    for (const name of record.remove) if ((await inspect(join(root, name))) !== undefined) presentOld.push(name);
    const indexThere = (await inspect(indexPath)) !== undefined;
    const pending: boolean[] = [];
    for (const [i, shard] of record.shards.entries()) {
      const staged = await inspect(join(root, shard.staged));
      const placed = staged === undefined ? await inspect(shardPaths[i] as string) : undefined;
      const found = staged ?? placed;
      if (found === undefined || found.size !== shard.bytes || found.ino !== shard.ino) {
        const what =
          staged !== undefined
            ? `its temp ${quoteValue(shard.staged)} has ${staged.size} bytes${staged.ino === shard.ino ? '' : ' and is another file'}`
            : placed !== undefined
              ? `its temp is gone and the file in its place (${placed.size} bytes) is ${placed.ino === shard.ino ? 'of another size' : 'not that temp renamed (an old shard, or another file)'}`
              : 'neither its temp nor a file in its place exists';
        const oldWhole = pending.every((isPending) => isPending) && presentOld.length === record.remove.length && indexThere;
        const advice = oldWhole
          ? `no old file was removed, so the old model is whole: remove the record ${quoteValue(recordPath)} and the staged temps (.<shard name>.tmp-<pid>-<12 hex>) to keep it, then write the model again`
          : 'the new model cannot be finished from this record: write the model again (remove the record and any staged temps first)';
        throw new SafetensorsError('COMMIT_SHARD_MISSING', `staged shard ${quoteValue(shard.name)} should have ${shard.bytes} bytes, but ${what}; nothing was changed; ${advice}`, {
          file: shardPaths[i] as string,
          offsets: { expected: shard.bytes, ...(found !== undefined ? { actual: found.size } : {}) },
        });
      }
      pending.push(staged !== undefined);
    }
    // The writer renames only once every old file is gone (and fsynced): with a shard in place, an old
    // file of the same name is that new shard.
    const inPlace = new Set(record.shards.filter((_, i) => pending[i] !== true).map((shard) => shard.name));
    for (const name of presentOld) {
      if (inPlace.has(name)) continue;
      await observeCommitStep(`resume-remove-shard ${name}`);
      await unlinkIfPresent(join(root, name));
    }
    if (pending.some((isPending) => isPending)) {
      // Any index there is the old one: the new one is written after the last rename.
      await observeCommitStep('resume-remove-index');
      await unlinkIfPresent(indexPath);
    }
    await syncDirectory(root);
    for (const [i, shard] of record.shards.entries()) {
      if (pending[i] !== true) continue;
      await observeCommitStep(`resume-rename-shard ${i + 1}`);
      await rename(join(root, shard.staged), shardPaths[i] as string);
    }
    await syncDirectory(root);
    await observeCommitStep('resume-write-index');
    await writeFileAtomic(indexPath, new TextEncoder().encode(record.index));
    // Under the lock no commit of this index runs: every temp of the index (a killed writer's or
    // resume's) and of the record (a writer killed before putting it in place), and every stale
    // lock moved aside, is garbage.
    for (const name of await readdir(root)) {
      if (isCommitTempName(name, record.indexFileName)) await unlinkIfPresent(join(root, name));
    }
    await observeCommitStep('resume-remove-commit-record');
    await unlinkIfPresent(recordPath);
    await syncDirectory(root);
  } catch (error) {
    return rethrowIo(error, root);
  }
  return { indexPath, shardPaths };
}

/** `.<index>.tmp-<pid>-<12 hex>`, `..<index>.commit.tmp-<pid>-<12 hex>`, `.<index>.commit.lock.stale-<pid>-<12 hex>`. */
function isCommitTempName(name: string, indexFileName: string): boolean {
  const tempOf = (final: string): boolean => name.startsWith(`.${final}.tmp-`) && /^\d{1,10}-[0-9a-f]{12}$/.test(name.slice(final.length + 6));
  return tempOf(indexFileName) || tempOf(commitRecordNameFor(indexFileName)) || isStaleLockName(name, indexFileName);
}

/**
 * A regular file's size and inode number (decimal); undefined where there is none. Anything else
 * there (a directory) or a failing lstat fails before anything is removed.
 */
async function inspect(path: string): Promise<{ size: number; ino: string } | undefined> {
  let info;
  try {
    info = await lstat(path, { bigint: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException)?.code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
  if (info.isDirectory()) throw Object.assign(new Error(`${path} is a directory, not a file to replace`), { code: 'EISDIR' });
  return { size: Number(info.size), ino: String(info.ino) };
}
