import { createHash, randomBytes } from 'node:crypto';
import { constants, readFileSync, readlinkSync } from 'node:fs';
import { open, readdir, stat, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { numberedShardPrefix } from './check-shard-numbering.js';
import { SafetensorsError } from './errors.js';
import { findDuplicateJsonKey } from './find-duplicate-json-key.js';
import { MAX_INDEX_BYTES } from './limits.js';
import { MAX_COMMIT_RECORD_BYTES } from './node-limits.js';
import { checkShardName, parseSafetensorsIndex } from './parse-safetensors-index.js';
import { quoteValue } from './quote-value.js';
import { readFully } from './read-fully.js';

/** The record's `format`; `version` is COMMIT_RECORD_VERSION. */
const COMMIT_RECORD_FORMAT = 'splitzip-sharded-model-commit';
const COMMIT_RECORD_VERSION = 1;

/** Above the kernel's pid_max limit (2^22) no process has a pid. */
const MAX_PID = 4_194_304;
const MAX_HOST_CHARS = 255;
const PID_NAMESPACE_PATTERN = /^pid:\[\d{1,20}\]$/;
const WRITER_ID_PATTERN = /^[0-9a-f]{32}$/;
/** temporaryPathFor()'s names: `.<final>.tmp-<pid>-<12 hex>`. */
const STAGED_NAME_PATTERN = /^\.(.+)\.tmp-\d{1,10}-[0-9a-f]{12}$/;
/** `.<indexFileName>.commit` */
const RECORD_NAME_PATTERN = /^\.(.+)\.commit$/;
/** How every record's text starts (JSON.stringify(record, null, 1), `format` first): tells it from an unrelated `.<x>.commit` file. */
const RECORD_TEXT_START = `{\n "format": "${COMMIT_RECORD_FORMAT}",`;
/** A file name (one path segment) longer than this is ENAMETOOLONG on Linux and macOS (NAME_MAX). */
const MAX_NAME_SEGMENT_BYTES = 255;
/** A path longer than this is ENAMETOOLONG (Linux PATH_MAX 4096, its NUL included). */
const MAX_PATH_BYTES = 4095;
/** An inode number (bigint stat), in decimal: above 2^53 on some file systems. */
const INO_PATTERN = /^\d{1,20}$/;

/**
 * One staged shard of a commit: its hidden temp's name, its final name, its file size and its inode
 * number (decimal; rename keeps it: proves that a file under the final name is this temp renamed,
 * not an old shard of the same name and size).
 */
export interface CommitRecordShard {
  staged: string;
  name: string;
  bytes: number;
  ino: string;
}

/**
 * What a sharded writer's commit will do, written (atomically) before its first old file is removed
 * and removed once the index is written: all that a roll-forward after a kill needs.
 */
export interface CommitRecord {
  format: typeof COMMIT_RECORD_FORMAT;
  version: typeof COMMIT_RECORD_VERSION;
  /** The writer's process (messages; liveness where `host` and `pidNamespace` are this process's). */
  pid: number;
  host: string;
  pidNamespace: string | null;
  /** Random id of the writer: tells its own commits in flight from abandoned ones within one process. */
  writerId: string;
  indexFileName: string;
  /** Old files to remove (relative names, as the old index named them), the old index aside. */
  remove: string[];
  shards: CommitRecordShard[];
  /** The new index's text (its UTF-8 bytes are the index), their length and sha256 (hex). */
  index: string;
  indexBytes: number;
  indexSha256: string;
}

/** The record's file name for an index name: hidden, ending neither in `.safetensors` nor `.json`. */
export function commitRecordNameFor(indexFileName: string): string {
  return `.${indexFileName}.commit`;
}

/**
 * The commit records among a directory's names: `.<indexFileName>.commit` for a plain index name,
 * whose text starts as a record's does (a hidden `*.commit` file of something else is none).
 */
export async function findCommitRecordNames(dir: string, names: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const name of names) {
    const indexFileName = RECORD_NAME_PATTERN.exec(name)?.[1];
    if (indexFileName !== undefined && isPlainName(indexFileName) && (await startsLikeRecord(join(dir, name)))) found.push(name);
  }
  return found.sort();
}

/** The commit records in `dir` (none where it cannot be listed). */
export async function listCommitRecords(dir: string): Promise<string[]> {
  return findCommitRecordNames(dir, await readdir(dir).catch(() => []));
}

async function startsLikeRecord(path: string): Promise<boolean> {
  let handle: FileHandle | undefined;
  try {
    // O_NONBLOCK: a FIFO of that name opens at once and is no regular file.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
    if (!(await handle.stat()).isFile()) return false;
    const start = new Uint8Array(RECORD_TEXT_START.length);
    const { bytesRead } = await handle.read(start, 0, start.length, 0);
    return new TextDecoder().decode(start.subarray(0, bytesRead)) === RECORD_TEXT_START;
  } catch {
    return false;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/**
 * Commits and resumes of this module instance (ids) that settled leaving a record or lock behind
 * (a failed commit, a release that failed): a record or lock of this process (same pid) is a live
 * one's unless its id is here. A commit that leaves nothing adds no id, a resume that finishes a
 * record drops its writer's, and at most MAX_SETTLED_IDS are kept (the oldest dropped: its
 * leftovers are then taken for a live commit's, COMMIT_IN_PROGRESS until writerStopped, never
 * broken wrongly). Another instance (a worker thread, the CJS copy of this package) has its own
 * set: to it, this process's commits are alive.
 */
const settledCommits = new Set<string>();
const MAX_SETTLED_IDS = 4096;

export function newWriterId(): string {
  return randomBytes(16).toString('hex');
}

export function markCommitSettled(writerId: string): void {
  settledCommits.add(writerId);
  if (settledCommits.size > MAX_SETTLED_IDS) settledCommits.delete(settledCommits.values().next().value as string);
}

/** Drops a settled id whose record and lock are gone. */
export function forgetCommitSettled(writerId: string): void {
  settledCommits.delete(writerId);
}

/** How many settled ids this module instance keeps (tests). */
export function countSettledCommits(): number {
  return settledCommits.size;
}

/** The staged shards' inode numbers (decimal), for the record. */
export async function readInodeNumbers(paths: readonly string[]): Promise<string[]> {
  return Promise.all(paths.map(async (path) => String((await stat(path, { bigint: true })).ino)));
}

export function buildCommitRecord(fields: { writerId: string; indexFileName: string; remove: readonly string[]; shards: readonly CommitRecordShard[]; indexBytes: Uint8Array }): CommitRecord {
  return {
    format: COMMIT_RECORD_FORMAT,
    version: COMMIT_RECORD_VERSION,
    pid: process.pid,
    host: hostname(),
    pidNamespace: currentPidNamespace(),
    writerId: fields.writerId,
    indexFileName: fields.indexFileName,
    remove: [...fields.remove],
    shards: fields.shards.map((shard) => ({ ...shard })),
    index: new TextDecoder().decode(fields.indexBytes),
    indexBytes: fields.indexBytes.length,
    indexSha256: createHash('sha256').update(fields.indexBytes).digest('hex'),
  };
}

export function serializeCommitRecord(record: CommitRecord, file: string): Uint8Array {
  const bytes = new TextEncoder().encode(`${JSON.stringify(record, null, 1)}\n`);
  if (bytes.length > MAX_COMMIT_RECORD_BYTES) {
    throw new SafetensorsError('COMMIT_RECORD_INVALID', `commit record would have ${bytes.length} bytes, over MAX_COMMIT_RECORD_BYTES (${MAX_COMMIT_RECORD_BYTES})`, {
      file,
      offsets: { expected: MAX_COMMIT_RECORD_BYTES, actual: bytes.length },
    });
  }
  return bytes;
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Reads and checks a commit record (`file`, named `recordName` in its directory): size cap before
 * reading, UTF-8 JSON without repeated keys, and every field (COMMIT_RECORD_INVALID naming it in `key`).
 */
export async function readCommitRecord(file: string, recordName: string): Promise<CommitRecord> {
  const invalid = (field: string, reason: string): SafetensorsError =>
    new SafetensorsError('COMMIT_RECORD_INVALID', `commit record field ${quoteValue(field)} ${reason}: the record is damaged; nothing was changed`, { file, key: field });
  let handle: FileHandle | undefined;
  let bytes: Uint8Array;
  try {
    // O_NONBLOCK: a FIFO in its place opens at once and fails the regular-file check.
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
    const info = await handle.stat();
    if (!info.isFile()) throw invalid('<file>', 'is not in a regular file');
    if (info.size > MAX_COMMIT_RECORD_BYTES) throw invalid('<file>', `has ${info.size} bytes, over MAX_COMMIT_RECORD_BYTES (${MAX_COMMIT_RECORD_BYTES})`);
    bytes = new Uint8Array(info.size);
    await readFully(handle, bytes, 0, file);
  } finally {
    await handle?.close().catch(() => undefined);
  }
  let text: string;
  let root: unknown;
  try {
    text = utf8Decoder.decode(bytes);
    root = JSON.parse(text);
  } catch {
    throw invalid('<file>', 'is not UTF-8 JSON');
  }
  const duplicate = findDuplicateJsonKey(text);
  if (duplicate) throw invalid(duplicate.key, 'appears twice in one object');
  if (root === null || typeof root !== 'object' || Array.isArray(root)) throw invalid('<file>', 'is not a JSON object');
  const value = root as Record<string, unknown>;
  const known = new Set(['format', 'version', 'pid', 'host', 'pidNamespace', 'writerId', 'indexFileName', 'remove', 'shards', 'index', 'indexBytes', 'indexSha256']);
  for (const key of Object.keys(value)) if (!known.has(key)) throw invalid(key, 'is not a field of a commit record');
  if (value.format !== COMMIT_RECORD_FORMAT) throw invalid('format', `is ${quoteValue(value.format)}, not ${quoteValue(COMMIT_RECORD_FORMAT)}`);
  if (value.version !== COMMIT_RECORD_VERSION) throw invalid('version', `is ${quoteValue(value.version)}, not ${COMMIT_RECORD_VERSION} (a record of another version of this package)`);
  if (!Number.isSafeInteger(value.pid) || (value.pid as number) < 1 || (value.pid as number) > MAX_PID) throw invalid('pid', `is ${quoteValue(value.pid)}, not a pid`);
  if (typeof value.host !== 'string' || value.host.length > MAX_HOST_CHARS) throw invalid('host', `is ${quoteValue(value.host)}, not a host name`);
  if (value.pidNamespace !== null && !(typeof value.pidNamespace === 'string' && PID_NAMESPACE_PATTERN.test(value.pidNamespace))) {
    throw invalid('pidNamespace', `is ${quoteValue(value.pidNamespace)}, neither null nor pid:[<inode>]`);
  }
  if (typeof value.writerId !== 'string' || !WRITER_ID_PATTERN.test(value.writerId)) throw invalid('writerId', `is ${quoteValue(value.writerId)}, not 32 hex digits`);
  const indexFileName = value.indexFileName;
  if (typeof indexFileName !== 'string' || !isPlainName(indexFileName) || commitRecordNameFor(indexFileName) !== recordName) {
    throw invalid('indexFileName', `is ${quoteValue(indexFileName)}, not the plain file name this record (${quoteValue(recordName)}) is named after`);
  }
  // Every name is checked for length here, before resume removes anything: a name the file system
  // refuses (ENAMETOOLONG) failed only after the old files before it were gone, on every run.
  const dir = dirname(file);
  const longIndex = findLongName(dir, [indexFileName, `.${indexFileName}.tmp-${MAX_PID}-000000000000`]);
  if (longIndex !== undefined) throw invalid('indexFileName', `is ${quoteValue(indexFileName)}, ${describeLongName(dir, longIndex)}`);
  // The new shards: one complete numbered set, in order, each staged under temporaryPathFor()'s name.
  if (!Array.isArray(value.shards) || value.shards.length === 0) throw invalid('shards', 'is not a non-empty array');
  const shards: CommitRecordShard[] = [];
  const finals = new Set<string>();
  const prefix = numberedShardPrefix(typeof value.shards[0]?.name === 'string' ? (value.shards[0].name as string) : '');
  for (const [i, item] of (value.shards as unknown[]).entries()) {
    const field = `shards[${i}]`;
    if (item === null || typeof item !== 'object' || Array.isArray(item)) throw invalid(field, 'is not an object');
    const shard = item as Record<string, unknown>;
    if (Object.keys(shard).some((key) => key !== 'staged' && key !== 'name' && key !== 'bytes' && key !== 'ino')) throw invalid(field, 'has a field other than staged, name, bytes, ino');
    const { name, staged, bytes: size, ino } = shard;
    const count = value.shards.length;
    const expected = prefix !== undefined && isPlainName(prefix) ? `${prefix}-${String(i + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.safetensors` : undefined;
    if (typeof name !== 'string' || name !== expected) throw invalid(`${field}.name`, `is ${quoteValue(name)}, not shard ${i + 1} of ${count} of one numbered set`);
    if (typeof staged !== 'string' || !isPlainName(staged) || STAGED_NAME_PATTERN.exec(staged)?.[1] !== name) {
      throw invalid(`${field}.staged`, `is ${quoteValue(staged)}, not a temp name of ${quoteValue(name)} (.<name>.tmp-<pid>-<12 hex>)`);
    }
    if (!Number.isSafeInteger(size) || (size as number) < 8) throw invalid(`${field}.bytes`, `is ${quoteValue(size)}, not a shard's file size`);
    if (typeof ino !== 'string' || !INO_PATTERN.test(ino)) throw invalid(`${field}.ino`, `is ${quoteValue(ino)}, not an inode number in decimal`);
    const long = findLongName(dir, [staged, name]);
    if (long !== undefined) throw invalid(`${field}.${long === staged ? 'staged' : 'name'}`, `is ${quoteValue(long)}, ${describeLongName(dir, long)}`);
    finals.add(name);
    shards.push({ name, staged, bytes: size as number, ino });
  }
  if (new Set(shards.map((shard) => shard.staged)).size !== shards.length) throw invalid('shards', 'names one temp file twice');
  if (!Array.isArray(value.remove)) throw invalid('remove', 'is not an array');
  const remove: string[] = [];
  for (const [i, name] of (value.remove as unknown[]).entries()) {
    const field = `remove[${i}]`;
    // The old index's rules for its shard names (a relative path inside the directory, no way up):
    // the writer removes the shards an old index names, in a subdirectory too.
    if (typeof name !== 'string' || !name.endsWith('.safetensors') || !isRelativeName(name)) throw invalid(field, `is ${quoteValue(name)}, not the name of a .safetensors file inside the directory`);
    if (remove.includes(name)) throw invalid(field, `names ${quoteValue(name)} twice`);
    if (findLongName(dir, [name]) !== undefined) throw invalid(field, `is ${quoteValue(name)}, ${describeLongName(dir, name)}`);
    remove.push(name);
  }
  if (typeof value.index !== 'string') throw invalid('index', 'is not a string');
  const indexBytes = new TextEncoder().encode(value.index);
  if (!Number.isSafeInteger(value.indexBytes) || value.indexBytes !== indexBytes.length || indexBytes.length > MAX_INDEX_BYTES) {
    throw invalid('indexBytes', `is ${quoteValue(value.indexBytes)}, the index has ${indexBytes.length} bytes (at most MAX_INDEX_BYTES)`);
  }
  if (value.indexSha256 !== createHash('sha256').update(indexBytes).digest('hex')) throw invalid('indexSha256', 'does not match the index');
  let indexShards: string[];
  try {
    indexShards = parseSafetensorsIndex(indexBytes, join(dirname(file), indexFileName)).shardNames;
  } catch (error) {
    throw invalid('index', `is no valid index (${error instanceof SafetensorsError ? error.code : 'error'})`);
  }
  if (indexShards.length !== finals.size || indexShards.some((name) => !finals.has(name))) throw invalid('index', 'names other shards than the record');
  return {
    format: COMMIT_RECORD_FORMAT,
    version: COMMIT_RECORD_VERSION,
    pid: value.pid as number,
    host: value.host,
    pidNamespace: value.pidNamespace as string | null,
    writerId: value.writerId,
    indexFileName,
    remove,
    shards,
    index: value.index,
    indexBytes: indexBytes.length,
    indexSha256: value.indexSha256 as string,
  };
}

const utf8Bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

/** The first name (relative to `root`) with a segment over MAX_NAME_SEGMENT_BYTES or a path over MAX_PATH_BYTES. */
function findLongName(root: string, names: readonly string[]): string | undefined {
  return names.find((name) => name.split('/').some((segment) => utf8Bytes(segment) > MAX_NAME_SEGMENT_BYTES) || utf8Bytes(join(root, name)) > MAX_PATH_BYTES);
}

function describeLongName(root: string, name: string): string {
  return name.split('/').some((segment) => utf8Bytes(segment) > MAX_NAME_SEGMENT_BYTES)
    ? `whose name has a segment over ${MAX_NAME_SEGMENT_BYTES} bytes (no file can have it)`
    : `whose path in ${root} is over ${MAX_PATH_BYTES} bytes (no file can have it)`;
}

/** One plain file name: no `/`, `\`, NUL, not `.`, `..` or empty (the writer's shardNamePrefix/indexFileName rule). */
function isPlainName(name: string): boolean {
  return !name.includes('/') && isRelativeName(name);
}

function isRelativeName(name: string): boolean {
  try {
    checkShardName(name, '', '');
    return true;
  } catch {
    return false;
  }
}

/** Who holds a commit (a record's writer, a commit lock's holder): its process and its id. */
export interface CommitHolder {
  pid: number;
  host: string;
  pidNamespace: string | null;
  writerId: string;
}

/**
 * Whether a commit's holder may still run: 'unseen' where its `host` or `pidNamespace` is not this
 * process's (its process cannot be seen); else 'alive' where its pid is a live process (not a
 * zombie) — this very process unless this module instance saw the commit settle —, 'dead' otherwise.
 * Advisory: a pid is reused.
 */
export function judgeCommitHolder(holder: CommitHolder): 'alive' | 'dead' | 'unseen' {
  if (holder.host !== hostname() || holder.pidNamespace !== currentPidNamespace()) return 'unseen';
  // A worker thread or another copy of this package in this process commits with its own module state.
  if (holder.pid === process.pid) return settledCommits.has(holder.writerId) ? 'dead' : 'alive';
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: it runs, as another user.
    if ((error as NodeJS.ErrnoException)?.code !== 'EPERM') return 'dead';
  }
  try {
    // A zombie (killed, not yet reaped) answers kill(pid, 0).
    const stat = readFileSync(`/proc/${holder.pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X' ? 'alive' : 'dead';
  } catch {
    return 'alive';
  }
}

/** Whether the record's writer may still be committing (judgeCommitHolder; one that cannot be seen is taken for gone). */
export function isCommitWriterAlive(record: CommitRecord): boolean {
  return judgeCommitHolder(record) === 'alive';
}

let pidNamespace: string | null | undefined;
/** `/proc/self/ns/pid`'s link text (`pid:[<inode>]`), null off Linux. */
export function currentPidNamespace(): string | null {
  if (pidNamespace === undefined) {
    try {
      const text = readlinkSync('/proc/self/ns/pid');
      pidNamespace = PID_NAMESPACE_PATTERN.test(text) ? text : null;
    } catch {
      pidNamespace = null;
    }
  }
  return pidNamespace;
}

/** A commit lock's text as a holder (undefined where it is none: empty, cut short, damaged). */
export function parseCommitHolder(text: string): CommitHolder | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const { pid, host, pidNamespace, writerId } = value as Record<string, unknown>;
  if (!Number.isSafeInteger(pid) || (pid as number) < 1 || (pid as number) > MAX_PID) return undefined;
  if (typeof host !== 'string' || host.length > MAX_HOST_CHARS) return undefined;
  if (pidNamespace !== null && !(typeof pidNamespace === 'string' && PID_NAMESPACE_PATTERN.test(pidNamespace))) return undefined;
  if (typeof writerId !== 'string' || !WRITER_ID_PATTERN.test(writerId)) return undefined;
  return { pid: pid as number, host, pidNamespace: pidNamespace as string | null, writerId };
}
