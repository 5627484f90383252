import { lstat, readFile, readdir, rename } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { syncDirectory, writeFileAtomic } from './atomic-file.js';
import { checkRemovalsInside } from './check-removal-inside.js';
import { acquireCommitLock, isStaleLockName } from './commit-lock.js';
import { commitRecordNameFor, forgetCommitSettled, isCommitWriterAlive, listCommitRecords, markCommitSettled, newWriterId, readCommitRecord, type CommitRecord, type CommitRecordShard } from './commit-record.js';
import { checkFileNameOption, observeCommitStep, unlinkIfPresent, type ShardedModelResult } from './create-sharded-model-writer.js';
import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';
import { checkOptions, optionNamesOf } from './check-options.js';
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

const RESUME_OPTION_NAMES = optionNamesOf<ResumeShardedModelWriteOptions>({ indexFileName: true, writerStopped: true });

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
  checkOptions(options, RESUME_OPTION_NAMES, 'resumeShardedModelWrite');
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
    const result = await finishCommit(root, record, recordPath);
    // Its record is gone and its lock was broken: this process no longer needs to know it settled.
    forgetCommitSettled(record.writerId);
    return result;
  } finally {
    if (!(await lock.release())) markCommitSettled(resumeId);
  }
}

async function finishCommit(root: string, record: CommitRecord, recordPath: string): Promise<ShardedModelResult> {
  const indexPath = join(root, record.indexFileName);
  const shardPaths = record.shards.map((shard) => join(root, shard.name));
  try {
    // Everything that can fail is checked before the first removal: every old file to remove lies
    // inside the directory (no linked directory on its path) and can be looked at; each staged
    // shard is under its temp name or, its temp gone, in place (findShardProblem) with its size.
    await checkRemovalsInside(root, record.remove, recordPath);
    const presentOld: string[] = [];
    for (const name of record.remove) if ((await inspect(join(root, name))) !== undefined) presentOld.push(name);
    const shards = await Promise.all(
      record.shards.map(async (shard, i) => {
        const staged = await inspect(join(root, shard.staged));
        const placed = staged === undefined ? await inspect(shardPaths[i] as string) : undefined;
        return { staged, placed };
      }),
    );
    // Whether the index there is the old one: the new one is written after the last rename, so with
    // a shard still staged it is; with none, it is unless it holds the new index's text.
    const indexFound = await inspect(indexPath);
    const indexOld =
      indexFound !== undefined && (shards.some((item) => item.staged !== undefined) || !(indexFound.size === record.indexBytes && (await readFile(indexPath, 'utf8')) === record.index));
    const problem = findShardProblem(record, shards, presentOld, indexOld);
    if (problem !== undefined) {
      const { i, what } = problem;
      const shard = record.shards[i] as CommitRecordShard;
      const found = shards[i]?.staged ?? shards[i]?.placed;
      // The old model is whole only where nothing was removed: every old file and the index there,
      // every new shard still under its temp name. Otherwise the temps may be the only copy of it.
      const oldWhole = presentOld.length === record.remove.length && indexOld && shards.every((item, j) => item.staged !== undefined || j === i);
      const left = record.shards.filter((_, j) => shards[j]?.staged !== undefined).map((item) => `${item.staged} -> ${item.name}`);
      const advice = oldWhole
        ? `no old file was removed, so the old model is whole: remove the record ${quoteValue(recordPath)} and the staged temps (.<shard name>.tmp-<pid>-<12 hex>) to keep it, then write the model again`
        : `the old model is no longer whole and the staged temps may be the only copy of the new one: keep them; where this directory is a copy, resume in the original one, or rename each staged temp to its final name${left.length > 0 ? ` (${left.join(', ')})` : ''} and run resumeShardedModelWrite again; where a shard is damaged, write the model again (keep these files until it is written)`;
      throw new SafetensorsError('COMMIT_SHARD_MISSING', `staged shard ${quoteValue(shard.name)} should have ${shard.bytes} bytes, but ${what}; nothing was changed; ${advice}`, {
        file: shardPaths[i] as string,
        offsets: { expected: shard.bytes, ...(found !== undefined ? { actual: found.size } : {}) },
      });
    }
    const pending = shards.map((item) => item.staged !== undefined);
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
    // lock moved aside and break sub-lock, is garbage.
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

/** `.<index>.tmp-<pid>-<12 hex>`, `..<index>.commit.tmp-<pid>-<12 hex>`, `.<index>.commit.lock.stale-<pid>-<12 hex>`, `.<index>.commit.lock.break` (isStaleLockName). */
function isCommitTempName(name: string, indexFileName: string): boolean {
  const tempOf = (final: string): boolean => name.startsWith(`.${final}.tmp-`) && /^\d{1,10}-[0-9a-f]{12}$/.test(name.slice(final.length + 6));
  return tempOf(indexFileName) || tempOf(commitRecordNameFor(indexFileName)) || isStaleLockName(name, indexFileName);
}

interface ShardFound {
  /** The file under its temp name, where there is one. */
  staged: FileFound | undefined;
  /** Its temp gone: the file under its final name, where there is one. */
  placed: FileFound | undefined;
}

/**
 * The first staged shard resume cannot take (its index and why), else undefined. A shard under its
 * temp name is taken by that name (random, the writer's) and its size: its inode number differs in
 * a copy of the directory (cp -a, rsync, a restore) and adds nothing. A file under the final name
 * (its temp gone) is the temp renamed where it is that very file (its recorded inode number) with
 * its size; where the inode differs (a copy, or an old shard of that name and size), it is taken
 * only where the commit's renames provably happened: the shards in place are a prefix of the list,
 * every later one is still a temp, the old index is gone (the new one may be there) and no old file
 * but those in place is there (the writer renames in order, only once every old file and the old
 * index are gone).
 */
function findShardProblem(record: CommitRecord, shards: readonly ShardFound[], presentOld: readonly string[], indexOld: boolean): { i: number; what: string } | undefined {
  const placedCount = shards.findIndex((item) => item.staged !== undefined);
  const prefix = placedCount === -1 ? shards.length : placedCount;
  const inOrder = shards.every((item, j) => (j < prefix ? item.staged === undefined : item.staged !== undefined));
  const placedNames = new Set(record.shards.slice(0, prefix).map((shard) => shard.name));
  const renamesHappened = inOrder && !indexOld && presentOld.every((name) => placedNames.has(name));
  for (const [i, shard] of record.shards.entries()) {
    const { staged, placed } = shards[i] as ShardFound;
    if (staged !== undefined) {
      if (staged.size !== shard.bytes) return { i, what: `its temp ${quoteValue(shard.staged)} has ${staged.size} bytes` };
      continue;
    }
    if (placed === undefined) return { i, what: 'neither its temp nor a file in its place exists' };
    if (placed.size !== shard.bytes) return { i, what: `its temp is gone and the file in its place has ${placed.size} bytes` };
    if (placed.ino !== shard.ino && !renamesHappened) {
      return { i, what: 'its temp is gone and the file in its place is not that temp renamed (another inode number) while the commit had not provably renamed it (an old shard, or a copy of the directory taken before its renames)' };
    }
  }
  return undefined;
}

type FileFound = { size: number; ino: string };

/**
 * A regular file's size and inode number (decimal); undefined where there is none. Anything else
 * there (a directory) or a failing lstat fails before anything is removed.
 */
async function inspect(path: string): Promise<FileFound | undefined> {
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
