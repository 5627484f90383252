import { constants } from 'node:fs';
import { mkdir, open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { syncDirectory, temporaryPathFor, writeFileAtomic } from './atomic-file.js';
import { computeTensorByteSize } from './compute-tensor-byte-size.js';
import { checkByteArray } from './check-byte-array.js';
import { describeShapeProblem } from './check-header-arguments.js';
import { checkRemovalsInside } from './check-removal-inside.js';
import { acquireCommitLock, checkCommitLockFree } from './commit-lock.js';
import { buildCommitRecord, commitRecordNameFor, findCommitRecordNames, markCommitSettled, newWriterId, readInodeNumbers, serializeCommitRecord } from './commit-record.js';
import { createSafetensorsWriter, type SafetensorsWriter } from './create-safetensors-writer.js';
import { isSafetensorsDtype } from './dtypes.js';
import { SafetensorsError } from './errors.js';
import { MAX_INDEX_BYTES } from './limits.js';
import { checkShardName, parseSafetensorsIndex } from './parse-safetensors-index.js';
import { numberedShardPrefix } from './check-shard-numbering.js';
import { checkOptions, optionNamesOf } from './check-options.js';
import { quoteValue } from './quote-value.js';
import { rethrowIo } from './rethrow-io.js';
import { checkTensorSpecs } from './check-tensor-specs.js';
import { serializeSafetensorsHeader } from './serialize-safetensors-header.js';
import type { TensorSpec } from './types.js';

export interface ShardedModelOptions {
  /** Largest data section of one shard; a tensor larger than this gets a shard of its own. */
  maxShardBytes: number;
  /** `__metadata__` of every shard (e.g. { format: 'pt' }). */
  shardMetadata?: Readonly<Record<string, string>> | null | undefined;
  /** Extra fields of the index's `metadata` (total_size is always set). */
  indexMetadata?: Readonly<Record<string, unknown>> | undefined;
  /** Shard file names are `<prefix>-00001-of-00003.safetensors` (default "model"). */
  shardNamePrefix?: string | undefined;
  /** Default "model.safetensors.index.json". */
  indexFileName?: string | undefined;
}

const SHARDED_OPTION_NAMES = optionNamesOf<ShardedModelOptions>({
  maxShardBytes: true,
  shardMetadata: true,
  indexMetadata: true,
  shardNamePrefix: true,
  indexFileName: true,
});

export interface ShardPlan {
  name: string;
  tensors: TensorSpec[];
  dataBytes: number;
}

export interface ShardedModelResult {
  indexPath: string;
  shardPaths: string[];
}

/** Streaming writer of a sharded model: tensors' bytes arrive in order, across shard boundaries. */
export interface ShardedModelWriter {
  readonly dir: string;
  readonly shards: readonly ShardPlan[];
  /** Sum of all tensors' sizes (the index's metadata.total_size). */
  readonly totalBytes: number;
  write(chunk: Uint8Array): Promise<void>;
  /**
   * Stages the last shards, then replaces the directory's model: old shards and index removed, the
   * new shards renamed into place, the index written last (see commitModel). A failure once an old
   * file is gone is retried; WRITE_INCOMPLETE where that fails (the staged shards and the commit
   * record are kept: resumeShardedModelWrite() finishes the commit). COMMIT_IN_PROGRESS, with nothing
   * removed, where the directory's commit lock is held (another writer's commit, a resume).
   */
  close(): Promise<ShardedModelResult>;
  /**
   * Removes every shard written so far (staged under hidden temp names): the directory is left as it
   * was. After a close() that failed past its point of no return (WRITE_INCOMPLETE) it removes nothing.
   */
  abort(): Promise<void>;
}

/** Hugging Face shard naming: model-00001-of-00003.safetensors. */
export function formatShardName(index: number, count: number, prefix = 'model'): string {
  const pad = (n: number) => String(n).padStart(5, '0');
  return `${prefix}-${pad(index + 1)}-of-${pad(count)}.safetensors`;
}

/** Greedy split in the given order: a shard takes tensors while its data stays <= maxShardBytes. */
export function planShards(specs: readonly TensorSpec[], maxShardBytes: number, prefix = 'model'): ShardPlan[] {
  return planShardsOf(specs, maxShardBytes, prefix, undefined);
}

/** planShards, its WRITE_INVALID_TENSOR naming `file` (the writer's directory; none for the pure planShards). */
function planShardsOf(specs: readonly TensorSpec[], maxShardBytes: number, prefix: string, file: string | undefined): ShardPlan[] {
  checkFileNameOption(prefix, 'shardNamePrefix');
  checkTensorSpecs(specs, file ?? '<planShards>');
  if (!Number.isSafeInteger(maxShardBytes) || maxShardBytes < 1) {
    throw new SafetensorsError('INVALID_ARGUMENT', `maxShardBytes must be a positive integer, got ${quoteValue(maxShardBytes)}`);
  }
  const groups: { tensors: TensorSpec[]; dataBytes: number }[] = [];
  let current: { tensors: TensorSpec[]; dataBytes: number } | undefined;
  for (const spec of specs) {
    // Screened by the test computeTensorByteSize applies (a rank-65 shape passed a narrower screen
    // and reached it: a bare INVALID_ARGUMENT naming no tensor).
    const tensor = typeof spec.name === 'string' ? spec.name : quoteValue(spec.name);
    const context = file === undefined ? { tensor } : { file, tensor };
    if (!isSafetensorsDtype(spec.dtype)) throw new SafetensorsError('WRITE_INVALID_TENSOR', `unknown dtype ${quoteValue(spec.dtype)}`, context);
    const shapeProblem = describeShapeProblem(spec.shape);
    if (shapeProblem !== undefined) throw new SafetensorsError('WRITE_INVALID_TENSOR', `shape${shapeProblem}`, context);
    const { byteSize: size, reason } = computeTensorByteSize(spec.shape, spec.dtype);
    if (size === undefined) {
      throw new SafetensorsError('WRITE_INVALID_TENSOR', reason === 'overflow' ? 'tensor size overflows' : `shape [${spec.shape.join(', ')}] of ${spec.dtype} is not a whole number of bytes`, context);
    }
    if (!current || (current.tensors.length > 0 && current.dataBytes + size > maxShardBytes)) {
      current = { tensors: [], dataBytes: 0 };
      groups.push(current);
    }
    current.tensors.push(spec);
    current.dataBytes += size;
  }
  if (groups.length === 0) groups.push({ tensors: [], dataBytes: 0 });
  return groups.map((group, i) => ({ name: formatShardName(i, groups.length, prefix), ...group }));
}

/**
 * Test seam: called before each file operation of the commit (close()), with the step's name. A
 * test observes the directory there, as a reader or a crash at that instant would find it.
 */
let commitStepObserver: ((step: string) => Promise<void> | void) | undefined;
export function setCommitStepObserver(observer: ((step: string) => Promise<void> | void) | undefined): void {
  commitStepObserver = observer;
}

/** Calls the test seam's observer (the writer's commit and resumeShardedModelWrite's steps). */
export async function observeCommitStep(step: string): Promise<void> {
  await commitStepObserver?.(step);
}

/**
 * Starts writing a sharded model into `dir` (created if missing): shards per planShards(), each
 * written to a hidden temp name and fsynced; close() then replaces whatever model the directory
 * held (commitShards) and writes `model.safetensors.index.json` (metadata.total_size, weight_map) last.
 */
export async function createShardedModelWriter(dir: string, specs: readonly TensorSpec[], options: ShardedModelOptions): Promise<ShardedModelWriter> {
  if (typeof dir !== 'string') throw new SafetensorsError('INVALID_ARGUMENT', `dir must be a path, got ${quoteValue(dir)}`);
  const root = resolve(dir);
  checkOptions(options, SHARDED_OPTION_NAMES, 'createShardedModelWriter', root);
  checkTensorSpecs(specs, root);
  const prefix = options.shardNamePrefix ?? 'model';
  const shards = planShardsOf(specs, options.maxShardBytes, prefix, root);
  const names = new Set<string>();
  for (const spec of specs) {
    if (names.has(spec.name)) throw new SafetensorsError('WRITE_INVALID_TENSOR', 'tensor name appears twice', { file: root, tensor: spec.name });
    names.add(spec.name);
  }
  const totalBytes = shards.reduce((sum, shard) => sum + shard.dataBytes, 0);
  const shardPaths = shards.map((shard) => join(root, shard.name));
  const indexPath = join(root, checkFileNameOption(options.indexFileName ?? 'model.safetensors.index.json', 'indexFileName'));
  // Every shard's header and the index are checked before anything is written: a bad name or
  // metadata in shard 2 was found only once shard 1 was on disk, and bad indexMetadata after commit.
  const shardFileBytes = shards.map((shard, i) => {
    const header = serializeSafetensorsHeader(shard.tensors, options.shardMetadata ?? null, shardPaths[i]);
    return header.dataStartBytes + header.dataBytes;
  });
  const indexBytes = new TextEncoder().encode(formatIndex(shards, totalBytes, checkIndexMetadata(options.indexMetadata, indexPath)));
  if (indexBytes.length > MAX_INDEX_BYTES) {
    throw new SafetensorsError('INDEX_TOO_LARGE', `index would have ${indexBytes.length} bytes, over MAX_INDEX_BYTES (${MAX_INDEX_BYTES})`, {
      file: indexPath,
      offsets: { expected: MAX_INDEX_BYTES, actual: indexBytes.length },
    });
  }
  parseSafetensorsIndex(indexBytes, indexPath);
  await refuseOtherModelFiles(root, prefix, indexPath);
  // A held commit lock (another writer's commit, a resume) was found only at close(), once every
  // byte was written: refused now, as a record is. A dead holder's lock the commit breaks.
  await checkCommitLockFree(root, basename(indexPath));
  await mkdir(root, { recursive: true }).catch((cause: unknown) => rethrowIo(cause, root));
  // Hidden names that no reader takes for a shard (they do not end with .safetensors).
  const stagedPaths = shardPaths.map((path) => temporaryPathFor(path));
  let shardIndex = 0;
  let writer: SafetensorsWriter | undefined;
  let state: 'open' | 'closed' | 'aborted' = 'open';
  const progress: CommitProgress = { changed: false, renamed: 0 };
  const recordPath = join(root, commitRecordNameFor(basename(indexPath)));
  const writerId = newWriterId();

  // Once abort() was called (or a call failed) the work in flight stops at its next step.
  const checkOpen = (): void => {
    if (state !== 'open') throw new SafetensorsError('WRITER_CLOSED', `writer is ${state}`, { file: root });
  };
  const current = async (): Promise<SafetensorsWriter> => {
    checkOpen();
    if (!writer) {
      const shard = shards[shardIndex] as ShardPlan;
      writer = await createSafetensorsWriter(stagedPaths[shardIndex] as string, shard.tensors, { metadata: options.shardMetadata ?? null });
    }
    return writer;
  };
  let discarded: Promise<void> | undefined;
  /** `failure`: the error that failed the write, kept as the cause where the record cannot be removed. */
  const discard = (failure?: unknown): Promise<void> =>
    (discarded ??= (async () => {
      if (state === 'closed') return;
      state = 'aborted';
      await writer?.abort();
      writer = undefined;
      // Past the commit's point of no return the staged shards may be the only copy of any model.
      if (progress.changed) return;
      // Written before the first old file is removed: with the old model whole, it goes before the
      // temps (the commit removes it under its lock; this is where that failed). A kill between
      // leaves temps without a record, never a record whose temps are partly gone. A record that
      // stays keeps its temps: it names them, and a resume needs them all.
      if (progress.recorded === true) {
        try {
          await unlink(recordPath);
        } catch (error) {
          if ((error as NodeJS.ErrnoException)?.code !== 'ENOENT') {
            const code = (error as NodeJS.ErrnoException)?.code ?? 'unknown';
            // The write's own failure is the cause (why it failed); the record's unlink error is named.
            const why = failure instanceof Error ? `: ${failure.message}` : '';
            throw new SafetensorsError(
              'IO_ERROR',
              `the write failed${why}; and file system error ${code} removing its commit record ${quoteValue(recordPath)}: its staged temps are kept (it names them): resumeShardedModelWrite(${quoteValue(root)}) finishes the write, or remove the record, then the temps, to keep the old model`,
              { file: recordPath, cause: failure ?? error },
            );
          }
        }
        await syncDirectory(root).catch(() => undefined);
      }
      await Promise.all(stagedPaths.map((path) => unlink(path).catch(() => undefined)));
    })());
  let inFlight: Promise<unknown> | undefined;
  const abort = async (): Promise<void> => {
    if (state === 'closed') return;
    state = 'aborted';
    // A write() in flight may be creating a shard's temp file: removing the temps before it stops
    // left them behind (13 runs of 20).
    await inFlight?.catch(() => undefined);
    await discard();
  };
  const guard = async <T>(work: () => Promise<T>): Promise<T> => {
    checkOpen();
    // Bytes must arrive in order: a second call while one is in flight is a caller bug.
    if (inFlight) throw new SafetensorsError('INVALID_ARGUMENT', 'write() or close() called before the previous call finished', { file: root });
    const run = (async () => {
      try {
        return await work();
      } catch (error) {
        await discard(error);
        return rethrowIo(error, root);
      }
    })();
    inFlight = run;
    try {
      return await run;
    } finally {
      inFlight = undefined;
    }
  };
  // Stages every finished shard (zero-byte shards included) and moves on.
  const advance = async (): Promise<void> => {
    while (shardIndex < shards.length) {
      checkOpen();
      const w = await current();
      if (w.writtenDataBytes < w.header.dataBytes) return;
      await w.close();
      writer = undefined;
      shardIndex += 1;
    }
  };

  return {
    dir: root,
    shards,
    totalBytes,
    // A chunk that is not bytes is refused before anything is written; the writer stays usable.
    write: async (chunk: Uint8Array) => {
      checkByteArray(chunk, 'a data chunk', root);
      return guard(async () => {
        let from = 0;
        while (from < chunk.length) {
          if (shardIndex >= shards.length) {
            throw new SafetensorsError('WRITE_SIZE_MISMATCH', `got more data bytes than the ${totalBytes} announced`, {
              file: root,
              offsets: { expected: totalBytes },
            });
          }
          const w = await current();
          const take = Math.min(chunk.length - from, w.header.dataBytes - w.writtenDataBytes);
          await w.write(chunk.subarray(from, from + take));
          from += take;
          await advance();
        }
      });
    },
    close: () =>
      guard(async () => {
        await advance();
        if (shardIndex < shards.length) {
          const w = await current();
          throw new SafetensorsError('WRITE_SIZE_MISMATCH', `shard ${shards[shardIndex]?.name} got ${w.writtenDataBytes} of ${w.header.dataBytes} data bytes`, {
            file: join(root, shards[shardIndex]?.name ?? ''),
            offsets: { expected: w.header.dataBytes, actual: w.writtenDataBytes },
          });
        }
        checkOpen();
        const plan: CommitPlan = { root, prefix, stagedPaths, shardPaths, shardFileBytes, indexPath, indexBytes, recordPath, writerId };
        // Until this commit settles, resumeShardedModelWrite() in this process (any module instance)
        // takes its record and lock for a live writer's.
        try {
          await commitModel(plan, progress).catch(async (error: unknown) => {
            // Before the first old file went, the old model is whole: abort() removes the temps.
            if (!progress.changed) throw error;
            await rollForward(plan, progress, error);
          });
        } finally {
          // Only where its record or lock may be left: a resume in this process then takes them for a settled commit's.
          if (progress.recorded === true || progress.lockLeft === true) markCommitSettled(writerId);
        }
        state = 'closed';
        return { indexPath, shardPaths };
      }),
    abort,
  };
}

/** What a commit puts in place: staged shard i goes to shardPaths[i], then the index. */
interface CommitPlan {
  root: string;
  prefix: string;
  stagedPaths: readonly string[];
  shardPaths: readonly string[];
  /** Each staged shard's file size (header and data), for the commit record. */
  shardFileBytes: readonly number[];
  indexPath: string;
  indexBytes: Uint8Array;
  /** The commit record (`.<index name>.commit`) and the writer's id in it. */
  recordPath: string;
  writerId: string;
}

/** How far a commit went, so that a retry resumes it: `changed` once the directory no longer holds the old model whole. */
interface CommitProgress {
  changed: boolean;
  /** Whether an old file was removed (the message says so only then). */
  removedOld?: boolean;
  /** The old files to remove, fixed at the first attempt (the old index goes during it). */
  doomed?: string[];
  /** How many staged shards are in place. */
  renamed: number;
  /** Whether the commit record may be in place (set before it is written, cleared once removed). */
  recorded?: boolean;
  /** Whether the new index was written (only the record's removal left). */
  indexWritten?: boolean;
  /** Whether the last release of the commit lock failed (the lock may be left). */
  lockLeft?: boolean;
}

/** Attempts of the commit after a failure past its point of no return, before WRITE_INCOMPLETE. */
const ROLL_FORWARD_ATTEMPTS = 2;

/**
 * Replaces the directory's model by the staged shards so that a reader (or a crash) at any instant
 * finds the old model, the new one, or a state it refuses, never a mix: first every old shard goes
 * (those the old index names, and every `<prefix>-NNNNN-of-MMMMM.safetensors`) while the old index
 * still names them (INDEX_SHARD_MISSING), then the old index; the new shards are renamed in order, so
 * until the last one the numbered set is incomplete (rule 20b, SHARD_SET_INCOMPLETE); the index is
 * written last. Before the first old file goes, a commit record (`.<index name>.commit`: the old
 * files, each staged shard's temp and final name and size, the new index) is written atomically;
 * it is removed once the index is in place: a process killed in between leaves it, and
 * resumeShardedModelWrite() finishes the commit from it. All of it runs under the commit lock
 * (commit-lock.ts). Resumable: a second call with the same `progress` goes on where the first failed.
 */
async function commitModel(plan: CommitPlan, progress: CommitProgress): Promise<void> {
  // Held from before the record is written until it is removed: a resume (or a commit of another
  // writer, another copy of this package) meanwhile removed this commit's new files as old ones.
  const lock = await acquireCommitLock(plan.root, basename(plan.indexPath), plan.writerId, false);
  try {
    await commitUnderLock(plan, progress);
  } catch (error) {
    // Failed with the old model whole: its record goes first, under the lock, then abort() removes
    // the temps; a resume started later finds no record (not one whose temps go while it runs).
    if (!progress.changed && progress.recorded === true) {
      await unlinkIfPresent(plan.recordPath)
        .then(() => syncDirectory(plan.root))
        .then(() => (progress.recorded = false))
        .catch(() => undefined);
    }
    throw error;
  } finally {
    progress.lockLeft = !(await lock.release());
  }
}

async function commitUnderLock(plan: CommitPlan, progress: CommitProgress): Promise<void> {
  const { root, prefix, stagedPaths, shardPaths, indexPath, indexBytes, recordPath } = plan;
  if (progress.renamed === 0) {
    // Checked again here, before anything is removed: such a file may have come since the start.
    progress.doomed ??= await refuseOtherModelFiles(root, prefix, indexPath);
    if (progress.recorded !== true) {
      const inodes = await readInodeNumbers(stagedPaths);
      const record = buildCommitRecord({
        writerId: plan.writerId,
        indexFileName: basename(indexPath),
        remove: progress.doomed,
        shards: stagedPaths.map((path, i) => ({ staged: basename(path), name: basename(shardPaths[i] as string), bytes: plan.shardFileBytes[i] as number, ino: inodes[i] as string })),
        indexBytes,
      });
      const bytes = serializeCommitRecord(record, recordPath);
      // Before the write: its directory's fsync may fail after the rename put the record in place.
      progress.recorded = true;
      await writeFileAtomic(recordPath, bytes);
    }
    for (const name of progress.doomed) {
      await commitStepObserver?.(`remove-shard ${name}`);
      if (await unlinkIfPresent(join(root, name))) progress.changed = progress.removedOld = true;
    }
    await commitStepObserver?.('remove-index');
    if (await unlinkIfPresent(indexPath)) progress.changed = progress.removedOld = true;
    await syncDirectory(root);
  }
  for (; progress.renamed < stagedPaths.length; progress.renamed += 1) {
    await commitStepObserver?.(`rename-shard ${progress.renamed + 1}`);
    await rename(stagedPaths[progress.renamed] as string, shardPaths[progress.renamed] as string);
    progress.changed = true;
  }
  await syncDirectory(root);
  await commitStepObserver?.('write-index');
  await writeFileAtomic(indexPath, indexBytes);
  progress.indexWritten = true;
  await commitStepObserver?.('remove-commit-record');
  await unlinkIfPresent(recordPath);
  progress.recorded = false;
  await syncDirectory(root);
}

/**
 * A commit failed past its point of no return (an old file removed, or a new shard in place):
 * removing the staged shards then would lose both models, so the commit is resumed instead; where
 * that fails too, WRITE_INCOMPLETE lists the staged shards not in place (temp file, final name).
 */
async function rollForward(plan: CommitPlan, progress: CommitProgress, firstError: unknown): Promise<void> {
  const { root, stagedPaths, shardPaths, indexPath } = plan;
  let lastError = firstError;
  for (let attempt = 0; attempt < ROLL_FORWARD_ATTEMPTS; attempt += 1) {
    try {
      await commitModel(plan, progress);
      return;
    } catch (error) {
      lastError = error;
    }
  }
  const staged = stagedPaths.slice(progress.renamed).map((temporaryPath, i) => ({ temporaryPath, path: shardPaths[progress.renamed + i] as string }));
  const reason = lastError instanceof Error ? lastError.message : quoteValue(lastError);
  const list = staged.map(({ temporaryPath, path }) => `${temporaryPath} -> ${path}`).join(', ');
  const resume = `resumeShardedModelWrite(${quoteValue(root)}) finishes the commit from its record ${plan.recordPath}`;
  if (progress.indexWritten === true) {
    throw new SafetensorsError('WRITE_INCOMPLETE', `the new model is in place, but its commit record could not be removed (${reason}): ${resume}`, { file: root, staged, cause: lastError });
  }
  const removed = progress.removedOld === true ? 'the old model was removed and ' : '';
  const where =
    staged.length > 0
      ? `${removed}the new one could not be put in place (${reason}); its staged shards, the only copy of them, are kept: ${list}; `
      : `${removed}every new shard is in place, but (${reason}) `;
  throw new SafetensorsError(
    'WRITE_INCOMPLETE',
    `the model is incomplete: ${where}the index ${indexPath} was not written: ${resume}, or write the model again${staged.length > 0 ? ' (its temp files are not removed)' : ''}`,
    { file: root, staged, cause: lastError },
  );
}

/**
 * The old model's files this write replaces (the shards the index of the same name names, every
 * `<prefix>-NNNNN-of-MMMMM.safetensors`); WRITE_OTHER_MODEL_FILE where the directory holds any
 * other `*.safetensors` or `*.safetensors.index.json`: a stale `model.safetensors`, shards of another
 * prefix or an index of another name would stay beside the new model, and a reader (or HF
 * transformers, which prefers `model.safetensors`) would open them or a mix. Other files
 * (config.json, a tokenizer) are left alone. A missing directory holds nothing. INDEX_SHARD_OUTSIDE
 * where an old shard's directory resolves outside the directory (checkRemovalsInside).
 */
async function refuseOtherModelFiles(root: string, prefix: string, indexPath: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') return [];
    return rethrowIo(error, root);
  }
  const indexName = basename(indexPath);
  // This write's own record name blocks whatever it holds (the commit would replace it).
  const ownRecord = commitRecordNameFor(indexName);
  const [record] = names.includes(ownRecord) ? [ownRecord] : await findCommitRecordNames(root, names);
  if (record !== undefined) {
    throw new SafetensorsError(
      'WRITE_COMMIT_PENDING',
      `the directory holds the commit record ${quoteValue(record)} of a sharded write interrupted during its commit (or committing now): finish it with resumeShardedModelWrite(${quoteValue(root)}) first (do not remove that write's files: its staged temps may be the only copy of the new model)`,
      { file: join(root, record) },
    );
  }
  const replaced = new Set<string>(names.includes(indexName) ? await readOldIndexShardNames(indexPath) : []);
  for (const name of names) {
    if (numberedShardPrefix(name) === prefix) replaced.add(name);
    else if (name !== indexName && !replaced.has(name) && (name.endsWith('.safetensors') || name.endsWith('.safetensors.index.json'))) {
      throw new SafetensorsError(
        'WRITE_OTHER_MODEL_FILE',
        `the directory holds ${quoteValue(name)}, a model file this write would not replace (a reader would open it or a mix with the new model): remove it or write into another directory`,
        { file: join(root, name) },
      );
    }
  }
  await checkRemovalsInside(root, [...replaced], indexPath);
  return [...replaced];
}

/** The .safetensors files an existing index names (none where it is missing or unreadable). */
async function readOldIndexShardNames(indexPath: string): Promise<string[]> {
  let handle: FileHandle | undefined;
  try {
    // O_NONBLOCK and a regular-file check: a FIFO there would block readFile forever.
    handle = await open(indexPath, constants.O_RDONLY | constants.O_NONBLOCK);
    const info = await handle.stat();
    if (!info.isFile() || info.size > MAX_INDEX_BYTES) return [];
    const index = parseSafetensorsIndex(await handle.readFile(), indexPath);
    // Rules 17-18b held: relative names inside the directory.
    return index.shardNames.filter((name) => name.endsWith('.safetensors'));
  } catch {
    return [];
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** true when it removed the file, false when there was none. */
export async function unlinkIfPresent(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code !== 'ENOENT') throw error;
    return false;
  }
}

/**
 * shardNamePrefix and indexFileName name files in the model directory: one plain segment (rules
 * 17-18b, and no `/`); '../esc' wrote outside it.
 */
export function checkFileNameOption(value: unknown, option: string): string {
  let reason: string | undefined;
  if (typeof value !== 'string') reason = `is ${quoteValue(value)}, not a string`;
  else if (value.includes('/')) reason = 'has a /';
  else {
    try {
      checkShardName(value, option, option);
    } catch (error) {
      reason = error instanceof SafetensorsError ? `is not a plain file name (${error.code})` : 'is not a plain file name';
    }
  }
  if (reason !== undefined) {
    throw new SafetensorsError('INVALID_ARGUMENT', `${option} ${quoteValue(value)} ${reason}: it must be one plain file name in the model directory`);
  }
  return value as string;
}

/**
 * indexMetadata: absent, or a plain object whose values JSON can write (`undefined`, a function or
 * a symbol wrote an index the reader refuses; a BigInt threw a TypeError after the commit).
 */
function checkIndexMetadata(value: unknown, file: string): Readonly<Record<string, unknown>> | undefined {
  if (value === undefined || value === null) return undefined;
  const prototype: unknown = typeof value === 'object' ? Object.getPrototypeOf(value) : undefined;
  if (typeof value !== 'object' || (prototype !== Object.prototype && prototype !== null)) {
    throw new SafetensorsError('INVALID_ARGUMENT', `indexMetadata must be a plain object, got ${quoteValue(value)}`, { file });
  }
  for (const [key, item] of Object.entries(value)) {
    let json: string | undefined;
    try {
      json = JSON.stringify(item);
    } catch (cause) {
      throw new SafetensorsError('INVALID_ARGUMENT', `indexMetadata ${quoteValue(key)} cannot be written as JSON (${cause instanceof Error ? cause.message : String(cause)})`, { file, cause });
    }
    if (json === undefined) throw new SafetensorsError('INVALID_ARGUMENT', `indexMetadata ${quoteValue(key)} is ${quoteValue(item)}, which JSON cannot write`, { file });
  }
  return value as Readonly<Record<string, unknown>>;
}

/** The index text; built by hand so weight_map keeps the tensors' order (integer-like names included). */
function formatIndex(shards: readonly ShardPlan[], totalBytes: number, extra: Readonly<Record<string, unknown>> = {}): string {
  const metadata = Object.entries({ ...extra, total_size: totalBytes }).map(([k, v]) => `    ${JSON.stringify(k)}: ${JSON.stringify(v)}`);
  const entries: string[] = [];
  for (const shard of shards) for (const tensor of shard.tensors) entries.push(`    ${JSON.stringify(tensor.name)}: ${JSON.stringify(shard.name)}`);
  return `{\n  "metadata": {\n${metadata.join(',\n')}\n  },\n  "weight_map": {\n${entries.join(',\n')}\n  }\n}\n`;
}
