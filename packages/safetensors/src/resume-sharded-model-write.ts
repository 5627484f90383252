import { lstat, readdir, rename } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { syncDirectory, writeFileAtomic } from './atomic-file.js';
import { checkRemovalsInside } from './check-removal-inside.js';
import { commitRecordNameFor, isCommitWriterAlive, listCommitRecords, readCommitRecord } from './commit-record.js';
import { checkFileNameOption, observeCommitStep, unlinkIfPresent, type ShardedModelResult } from './create-sharded-model-writer.js';
import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';
import { rethrowIo } from './rethrow-io.js';

export interface ResumeShardedModelWriteOptions {
  /** The interrupted write's indexFileName; needed only where the directory holds several commit records. */
  indexFileName?: string | undefined;
  /**
   * The caller knows that no writer of this directory runs (its pid, alive on this host, is another
   * process now): without it, a record whose writer's pid is alive here is COMMIT_IN_PROGRESS.
   */
  writerStopped?: boolean | undefined;
}

/**
 * Finishes the commit of a sharded writer that was killed (or failed: WRITE_INCOMPLETE) after it wrote
 * its commit record: removes the old files still there, renames each staged shard still under its
 * temp name into place, writes the index atomically, removes the record, fsyncs the directory.
 * Everything is checked first (the record's fields, every staged shard under its temp name or in
 * place, with its recorded size): a failure there changes nothing. Idempotent; safe to kill at any
 * step and run again. Returns what close() would have.
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
  const record = await readCommitRecord(recordPath, recordName).catch((error: unknown) => {
    const code = (error as NodeJS.ErrnoException)?.code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new SafetensorsError('COMMIT_RECORD_MISSING', `no commit record ${quoteValue(recordName)}: there is no interrupted sharded write to resume (a finished one removes its record)`, { file: recordPath, cause: error });
    }
    return rethrowIo(error, recordPath);
  });
  if (options.writerStopped !== true && isCommitWriterAlive(record)) {
    throw new SafetensorsError(
      'COMMIT_IN_PROGRESS',
      `the writer of this commit (pid ${record.pid}) still runs on this host: it may be committing now; pass { writerStopped: true } if that pid is another process`,
      { file: recordPath },
    );
  }
  const indexPath = join(root, record.indexFileName);
  const shardPaths = record.shards.map((shard) => join(root, shard.name));
  try {
    // Checked before anything changes: every old file to remove lies inside the directory (no linked
    // directory on its path), and a shard whose temp is gone must be in place with its size.
    await checkRemovalsInside(root, record.remove, recordPath);
    const pending: boolean[] = [];
    for (const [i, shard] of record.shards.entries()) {
      const staged = await sizeOf(join(root, shard.staged));
      const size = staged ?? (await sizeOf(shardPaths[i] as string));
      if (size !== shard.bytes) {
        const found =
          staged !== undefined
            ? `its temp ${quoteValue(shard.staged)} has ${staged}`
            : size !== undefined
              ? `its temp is gone and the file in its place has ${size}`
              : 'neither its temp nor a file in its place exists';
        throw new SafetensorsError(
          'COMMIT_SHARD_MISSING',
          `staged shard ${quoteValue(shard.name)} should have ${shard.bytes} bytes, but ${found}: the new model cannot be finished; nothing was changed`,
          { file: shardPaths[i] as string, offsets: { expected: shard.bytes, ...(size !== undefined ? { actual: size } : {}) } },
        );
      }
      pending.push(staged !== undefined);
    }
    // The writer renames only once every old file is gone (and fsynced): with a shard in place, an old
    // file of the same name is that new shard.
    const inPlace = new Set(record.shards.filter((_, i) => pending[i] !== true).map((shard) => shard.name));
    for (const name of record.remove) {
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
    // A writer killed while writing its index left that temp (garbage: the record holds the index).
    const indexTemp = `.${record.indexFileName}.tmp-${record.pid}-`;
    for (const name of await readdir(root)) {
      if (name.startsWith(indexTemp) && /^[0-9a-f]{12}$/.test(name.slice(indexTemp.length))) await unlinkIfPresent(join(root, name));
    }
    await observeCommitStep('resume-remove-commit-record');
    await unlinkIfPresent(recordPath);
    await syncDirectory(root);
  } catch (error) {
    return rethrowIo(error, root);
  }
  return { indexPath, shardPaths };
}

/** A regular file's size; undefined where there is none (or something else: a directory). */
async function sizeOf(path: string): Promise<number | undefined> {
  try {
    const info = await lstat(path);
    return info.isFile() ? info.size : undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') return undefined;
    throw error;
  }
}
