import { createHash } from 'node:crypto';
import { constants, fstatSync, readSync, statSync, type BigIntStats } from 'node:fs';
import { open, readdir, realpath, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, resolve, sep } from 'node:path';
import { checkOptions, optionNamesOf } from './check-options.js';
import { checkShardNumbering } from './check-shard-numbering.js';
import { listCommitRecords } from './commit-record.js';
import { describeBrokenLink, describeHubDirectory, describeHubRef } from './describe-hub-files.js';
import { describeCandidateModels, describeSubdirectoryModels, isModelFileName } from './describe-model-tree.js';
import { SafetensorsError } from './errors.js';
import { formatFileStamp, isSameFileContentStamp, isSameFileIgnoringCtime } from './file-stamp.js';
import { HEADER_PREFIX_BYTES, MAX_INDEX_BYTES, MAX_OBJECT_STAMP_CHARS, MAX_READ_CHUNK_BYTES, OBJECT_STAMP_PREFIX, STAMP_CHECK_INTERVAL_MS } from './limits.js';
import { MAX_POOLED_BUFFERS, MAX_POOLED_BUFFER_BYTES, MODEL_READER, allocateUninitialized, type ModelReader } from './model-reader.js';
import { parseHeaderLengthPrefix, parseSafetensorsHeader } from './parse-safetensors-header.js';
import { parseSafetensorsIndex, type ParsedIndex } from './parse-safetensors-index.js';
import { quoteValue } from './quote-value.js';
import { readFully } from './read-fully.js';
import { rethrowIo } from './rethrow-io.js';
import type { ParsedHeader, SafetensorsModel, SafetensorsShard, SliceKey, TensorInfo } from './types.js';

const INDEX_SUFFIX = '.safetensors.index.json';
const DEFAULT_INDEX_NAME = 'model.safetensors.index.json';
const SHARD_SUFFIX = '.safetensors';
/** A diffusers pipeline's root file: each component (unet/, vae/, ...) is a model of its own. */
const PIPELINE_INDEX_NAME = 'model_index.json';

/**
 * O_NONBLOCK: a FIFO in place of an index or shard opens at once and then fails the regular-file
 * check, where a plain open(2) would wait for a writer forever, holding one of libuv's four threads
 * (four such opens stall every file operation of the process). No effect on reads of regular files.
 * Links are followed: hub snapshots link every file to its blob.
 */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/** Positioned reads of one shard: a local file handle, or an object of a ByteSource. */
interface ShardIo {
  sizeBytes: number;
  /** SafetensorsShard.stamp. */
  stamp: string | null;
  /** The stamp now (one fstat of the open descriptor); null where there is none. */
  stampNow(): string | null;
  /** A path naming the open file itself (readShardDescriptorPath); null for an object. */
  descriptorPath(): string | null;
  /**
   * Whether the shard still has the prefix and header the model parsed (isShardHeaderUnchanged):
   * false once its size or mtime moved, or its ctime moved and the header reads otherwise now.
   * Always true for an object (its reads are conditional on its version).
   */
  headerUnchanged(): boolean;
  /** Fills all of `target` from `positionBytes`; UNEXPECTED_EOF (files) or the source's own error. */
  readAt(target: Uint8Array, positionBytes: number, tensor?: string): Promise<void>;
  close(): Promise<void>;
}

interface OpenedShard {
  shard: SafetensorsShard;
  io: ShardIo;
  header: ParsedHeader;
  /** SHA-256 of the prefix and header bytes as parsed. */
  headerDigest: Buffer;
  /** The file stamp of a local file as opened, its descriptor's (checkStillInPlace); none for an object. */
  fileId?: string;
}

/** An object of a ByteSource, opened: its size and positioned reads. */
export interface ByteSourceObject {
  readonly sizeBytes: number;
  /**
   * The object's version as its store names it (an S3 ETag), when known: the shard's stamp becomes
   * `etag:<etag>` (SafetensorsShard.stamp). Reads must serve this version or fail.
   */
  readonly etag?: string | undefined;
  /** Fills all of `target` with bytes [offsetBytes, offsetBytes + target.length) of the object (never more than MAX_READ_CHUNK_BYTES at once). */
  readInto(offsetBytes: number, target: Uint8Array): Promise<void>;
}

/**
 * Where a model's files live when they are not local files: a flat namespace of named objects
 * with positioned reads (e.g. the objects below an `s3://bucket/prefix/` through
 * `@splitzip/store`'s `openS3ObjectSource`, which has exactly this shape). Names are relative to
 * `url`; an index's shard names are validated lexically (rules 17-18) before they are opened.
 * Errors a source throws propagate unchanged (their own codes: e.g. a retryable outage).
 */
export interface ByteSource {
  /** Prefix of every object's name in messages and in `TensorInfo.shardPath`; ends with `/` for a directory-like source. */
  readonly url: string;
  /** Every object name (for the directory rules: an index, else every `*.safetensors`). */
  list(): Promise<string[]>;
  /** The object, or undefined when it does not exist. */
  open(name: string): Promise<ByteSourceObject | undefined>;
  /** Called by the model's close() when the model owns the source (`ownsSource`). */
  close?(): void | Promise<void>;
}

export interface OpenFromSourceOptions {
  source: ByteSource;
  /** The index object's name; default: the directory rules over `source.list()`. */
  index?: string | undefined;
  /** Close the source with the model (default false: the caller closes it). */
  ownsSource?: boolean | undefined;
}

const SOURCE_OPTION_NAMES = optionNamesOf<OpenFromSourceOptions>({ source: true, index: true, ownsSource: true });

/**
 * Opens a model: a `.safetensors` file, a directory (its `*.safetensors.index.json` if there is one,
 * else every `*.safetensors` in it, sorted by name), or an index file. Validates everything
 * (README "Validation order") before returning; the shard files stay open until close().
 */
export async function openSafetensorsModel(path: string | OpenFromSourceOptions): Promise<SafetensorsModel> {
  if (typeof path === 'object' && path !== null) {
    checkOptions(path, SOURCE_OPTION_NAMES, 'openSafetensorsModel');
    return openSourceModel(path);
  }
  if (typeof path !== 'string') throw new SafetensorsError('INVALID_ARGUMENT', 'a model is a path or { source }');
  const absolute = resolve(path);
  try {
    return await openModelAtPath(absolute);
  } catch (error) {
    throw await explainInterruptedCommit(await explainHubRef(error, absolute), absolute);
  }
}

/** HEADER_TOO_LARGE of a hub ref file given as the model (refs/main): says so, and names its snapshot. */
async function explainHubRef(error: unknown, absolute: string): Promise<unknown> {
  if (!(error instanceof SafetensorsError) || error.code !== 'HEADER_TOO_LARGE' || error.file !== absolute) return error;
  const ref = await describeHubRef(absolute);
  if (ref === undefined) return error;
  return new SafetensorsError('HEADER_TOO_LARGE', ref, { file: absolute, ...(error.offsets !== undefined ? { offsets: error.offsets } : {}), cause: error });
}

/** The codes a directory gives while a sharded writer commits (or once one was killed doing so). */
const COMMIT_STATE_CODES: ReadonlySet<string> = new Set(['INDEX_SHARD_MISSING', 'SHARD_SET_INCOMPLETE', 'NOT_SAFETENSORS', 'PATH_NOT_FOUND', 'SHARD_CHANGED']);

/**
 * A failed open of a directory (or of a file in it) that holds a sharded writer's commit record: the
 * message (same code) says a write was interrupted during its commit, or is committing now, and
 * names resumeShardedModelWrite. Looked for only here, on the failure path.
 */
async function explainInterruptedCommit(error: unknown, absolute: string): Promise<unknown> {
  if (!(error instanceof SafetensorsError) || !COMMIT_STATE_CODES.has(error.code)) return error;
  // A missing path is a file of the directory above it (a removed index) only where it is named like one.
  const named = absolute.endsWith('.json') || absolute.endsWith(SHARD_SUFFIX);
  const dir = await stat(absolute).then(
    (info) => (info.isDirectory() ? absolute : dirname(absolute)),
    () => (named ? dirname(absolute) : undefined),
  );
  if (dir === undefined) return error;
  const [record] = await listCommitRecords(dir);
  if (record === undefined) return error;
  error.message += `; the directory holds ${quoteValue(record)}: a sharded write into it was interrupted during its commit (or is committing now): resumeShardedModelWrite(${quoteValue(dir)}) finishes it`;
  return error;
}

async function openModelAtPath(absolute: string): Promise<SafetensorsModel> {
  const info = await statOrThrow(absolute);
  if (info.isDirectory()) {
    const names = await readdir(absolute).catch((cause: unknown) => rethrowIo(cause, absolute));
    const indexNames = names.filter((name) => name.endsWith(INDEX_SUFFIX)).sort();
    const indexName = indexNames.includes(DEFAULT_INDEX_NAME) ? DEFAULT_INDEX_NAME : indexNames.length === 1 ? indexNames[0] : undefined;
    // Not stat()ed here: openIndexedModel checks what it actually opened.
    if (indexName !== undefined) return openIndexedModel(resolve(absolute, indexName));
    if (indexNames.length > 1) {
      throw new SafetensorsError('NOT_SAFETENSORS', `directory holds several index files (${indexNames.join(', ')}); open one of them`, { file: absolute });
    }
    const shardNames = names.filter((name) => name.endsWith(SHARD_SUFFIX)).sort();
    if (shardNames.length === 0) {
      const tree = describeSubdirectoryModels(await findSubdirectoryModels(absolute, names), names.includes(PIPELINE_INDEX_NAME));
      const hub = await describeHubDirectory(absolute);
      throw new SafetensorsError('NOT_SAFETENSORS', `directory holds no .safetensors file and no index${tree}${hub}`, { file: absolute });
    }
    checkShardNumbering(shardNames, absolute);
    const rootReal = await realpath(absolute).catch((cause: unknown) => rethrowIo(cause, absolute));
    const locations: { name: string; path: string; realPath: string }[] = [];
    for (const name of shardNames) {
      const candidate = resolve(absolute, name);
      const realPath = await resolveInside(candidate, rootReal, name, candidate, 'shard');
      locations.push({ name, path: candidate, realPath });
    }
    const opened = await openShards(locations, 'shard');
    await checkStillInPlace(opened, undefined, absolute);
    try {
      return buildModel(absolute, null, null, opened, null);
    } catch (error) {
      const candidates = error instanceof SafetensorsError && error.code === 'DUPLICATE_TENSOR_NAME' ? describeCandidateModels(names) : undefined;
      if (candidates !== undefined) (error as SafetensorsError).message += candidates;
      throw error;
    }
  }
  if (!info.isFile()) {
    throw new SafetensorsError('NOT_SAFETENSORS', 'path is neither a file nor a directory', { file: absolute });
  }
  if (absolute.endsWith('.json')) return openIndexedModel(absolute);
  const rootDir = dirname(absolute);
  const realPath = await realpath(absolute).catch((cause: unknown) => rethrowIo(cause, absolute));
  return buildModel(rootDir, null, null, await openShards([{ name: basename(absolute), path: absolute, realPath }], 'shard'), null);
}

/**
 * The subdirectories (one level down, links followed) of a directory that holds a model file
 * (describeSubdirectoryModels): only on the failure path. One that cannot be read is left out.
 */
async function findSubdirectoryModels(absolute: string, names: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const name of names) {
    const inner = await readdir(resolve(absolute, name)).catch(() => undefined);
    if (inner?.some(isModelFileName)) found.push(name);
  }
  return found;
}

async function openIndexedModel(indexPath: string): Promise<SafetensorsModel> {
  const rootDir = dirname(indexPath);
  const { handle, info } = await openRegularFile(indexPath, indexPath, (kind) => new SafetensorsError('NOT_SAFETENSORS', `index is ${kind}, not a regular file`, { file: indexPath }));
  let bytes: Uint8Array;
  try {
    const size = Number(info.size);
    // Checked before allocating anything from the file's size.
    if (size > MAX_INDEX_BYTES) {
      throw new SafetensorsError('INDEX_TOO_LARGE', `index has ${size} bytes, over MAX_INDEX_BYTES (${MAX_INDEX_BYTES})`, {
        file: indexPath,
        offsets: { expected: MAX_INDEX_BYTES, actual: size },
      });
    }
    bytes = new Uint8Array(size);
    await readFully(handle, bytes, 0, indexPath);
  } finally {
    await handle.close().catch(() => undefined);
  }
  const index = parseSafetensorsIndex(bytes, indexPath);
  const rootReal = await realpath(rootDir).catch((cause: unknown) => rethrowIo(cause, rootDir));
  const locations: { name: string; path: string; realPath: string }[] = [];
  for (const name of index.shardNames) {
    const candidate = resolve(rootDir, name);
    const realPath = await resolveInside(candidate, rootReal, name, indexPath, 'index', index);
    locations.push({ name, path: candidate, realPath });
  }
  const opened = await openShards(locations, 'index', indexPath);
  await checkIndexAgainstShards(index, opened, indexPath);
  await checkStillInPlace(opened, { path: indexPath, fileId: formatFileStamp(info) }, indexPath);
  return buildModel(rootDir, indexPath, index.metadata, opened, indexPath);
}

/**
 * Rule 22's what-to-do: an index that disagrees with its shards is of another revision than they are
 * (left from an earlier write or download), and which of them is right cannot be told from here.
 */
const INDEX_MISMATCH_ADVICE =
  'the index does not describe its shards (an index and shards of two revisions of the model: one left from an earlier download or write): download the index and its shards again from one revision, or, where the shards are right, list the tensor in weight_map under ';

/** Rules 22-23: weight_map and the shards' headers must agree exactly (closes the shards on failure). */
async function checkIndexAgainstShards(index: ParsedIndex, opened: OpenedShard[], indexPath: string): Promise<void> {
  try {
    const namesByShard = new Map<string, Set<string>>();
    for (const { shard, header } of opened) {
      const names = new Set<string>();
      for (const tensor of header.tensors) {
        const listed = index.weightMap.get(tensor.name);
        if (listed !== shard.name) {
          throw new SafetensorsError(
            'INDEX_TENSOR_UNLISTED',
            `${listed === undefined ? `tensor of shard ${shard.name} is missing from weight_map` : `tensor of shard ${shard.name} is listed under shard ${listed}`}: ${INDEX_MISMATCH_ADVICE}${shard.name}`,
            { file: indexPath, tensor: tensor.name, offsets: { begin: tensor.dataOffsets[0], end: tensor.dataOffsets[1] } },
          );
        }
        names.add(tensor.name);
      }
      namesByShard.set(shard.name, names);
    }
    for (const [tensor, shardName] of index.weightMap) {
      if (!namesByShard.get(shardName)?.has(tensor)) {
        throw new SafetensorsError('INDEX_TENSOR_MISSING', `weight_map puts it in shard ${shardName}, whose header does not have it`, { file: indexPath, tensor });
      }
    }
  } catch (error) {
    await closeAll(opened);
    throw error;
  }
}

/**
 * A model whose files are objects of a ByteSource: the same directory rules (an index, else every
 * top-level `*.safetensors`), the same validation (rules 1-18, 20-23; rule 19 — real paths — has no
 * meaning for objects), headers read with two positioned reads per shard (length prefix, header).
 */
async function openSourceModel(options: OpenFromSourceOptions): Promise<SafetensorsModel> {
  const { source } = options;
  if (source === null || typeof source !== 'object' || typeof source.open !== 'function' || typeof source.list !== 'function' || typeof source.url !== 'string') {
    throw new SafetensorsError('INVALID_ARGUMENT', 'source must be a ByteSource { url, list, open }');
  }
  const rootDir = source.url;
  const where = (name: string) => `${rootDir}${name}`;
  try {
    let indexName = options.index;
    let shardNames: string[] = [];
    if (indexName === undefined) {
      // Only top-level objects count, as in a directory.
      const listed: unknown = await source.list();
      if (!Array.isArray(listed) || !listed.every((name) => typeof name === 'string')) {
        throw new SafetensorsError('INVALID_ARGUMENT', `source.list() returned ${quoteValue(listed)}, not an array of names`, { file: rootDir });
      }
      const names = (listed as string[]).filter((name) => !name.includes('/'));
      const indexNames = names.filter((name) => name.endsWith(INDEX_SUFFIX)).sort();
      indexName = indexNames.includes(DEFAULT_INDEX_NAME) ? DEFAULT_INDEX_NAME : indexNames.length === 1 ? indexNames[0] : undefined;
      if (indexName === undefined && indexNames.length > 1) {
        throw new SafetensorsError('NOT_SAFETENSORS', `source holds several index files (${indexNames.join(', ')}); name one`, { file: rootDir });
      }
      shardNames = names.filter((name) => name.endsWith(SHARD_SUFFIX)).sort();
      if (indexName === undefined && shardNames.length === 0) {
        // One level down: `unet/x.safetensors` names the subdirectory `unet`.
        const subdirectories = new Set<string>();
        for (const name of listed as string[]) {
          const parts = name.split('/');
          if (parts.length === 2 && parts[0] !== '' && isModelFileName(parts[1] as string)) subdirectories.add(parts[0] as string);
        }
        const tree = describeSubdirectoryModels([...subdirectories], names.includes(PIPELINE_INDEX_NAME));
        throw new SafetensorsError('NOT_SAFETENSORS', `source holds no .safetensors object and no index${tree}`, { file: rootDir });
      }
    }
    if (indexName === undefined) {
      checkShardNumbering(shardNames, rootDir);
      const model = buildModel(rootDir, null, null, await openSourceShards(source, shardNames, rootDir), null);
      return withSourceClose(model, options);
    }
    const indexPath = where(indexName);
    const indexObject = await source.open(indexName);
    if (indexObject === undefined) throw new SafetensorsError('PATH_NOT_FOUND', 'no such index object', { file: indexPath });
    // Checked before allocating anything from the object's size.
    if (!Number.isSafeInteger(indexObject.sizeBytes) || indexObject.sizeBytes < 0 || indexObject.sizeBytes > MAX_INDEX_BYTES) {
      throw new SafetensorsError('INDEX_TOO_LARGE', `index has ${quoteValue(indexObject.sizeBytes)} bytes, over MAX_INDEX_BYTES (${MAX_INDEX_BYTES})`, {
        file: indexPath,
        offsets: { expected: MAX_INDEX_BYTES, actual: indexObject.sizeBytes },
      });
    }
    const bytes = new Uint8Array(indexObject.sizeBytes);
    await readObjectFully(indexObject, bytes, 0);
    const index = parseSafetensorsIndex(bytes, indexPath);
    const opened = await openSourceShards(source, index.shardNames, indexPath, index);
    await checkIndexAgainstShards(index, opened, indexPath);
    return withSourceClose(buildModel(rootDir, indexPath, index.metadata, opened, indexPath), options);
  } catch (error) {
    if (options.ownsSource) await source.close?.();
    throw error;
  }
}

function withSourceClose(model: SafetensorsModel, options: OpenFromSourceOptions): SafetensorsModel {
  if (!options.ownsSource) return model;
  const closeModel = model.close;
  (model as { close: () => Promise<void> }).close = async () => {
    await closeModel();
    await options.source.close?.();
  };
  return model;
}

/** Rule 20 for objects (each named shard exists), then rules 1-16 per shard. */
async function openSourceShards(source: ByteSource, names: readonly string[], file: string, index?: ParsedIndex): Promise<OpenedShard[]> {
  const opened: OpenedShard[] = [];
  try {
    for (const name of names) {
      const object = await source.open(name);
      const path = `${source.url}${name}`;
      if (object === undefined) throw new SafetensorsError('INDEX_SHARD_MISSING', `shard ${quoteValue(name)} does not exist`, { file, ...shardContext(name, index) });
      if (!Number.isSafeInteger(object.sizeBytes) || object.sizeBytes < 0) {
        throw new SafetensorsError('NOT_SAFETENSORS', `shard ${quoteValue(name)} reports an invalid size ${quoteValue(object.sizeBytes)}`, { file });
      }
      const io: ShardIo = {
        sizeBytes: object.sizeBytes,
        // A cache built from a local copy of the model (the builder reads local files) has no
        // object stamp: a reader checks the object's bytes against the binding once, then records it.
        stamp: objectStamp(object.etag),
        // The object's reads are conditional on its version (they fail once it is replaced).
        stampNow: () => null,
        descriptorPath: () => null,
        headerUnchanged: () => true,
        readAt: (target, positionBytes) => readObjectFully(object, target, positionBytes),
        close: async () => undefined,
      };
      opened.push(await readShardHeader(name, path, io));
    }
  } catch (error) {
    await closeAll(opened);
    throw error;
  }
  return opened;
}

/**
 * The fields naming a shard in its errors: `shard`, and with an index the first tensor it maps to that
 * shard (`tensor`), so that a loader reads both from fields rather than from the message.
 */
function shardContext(name: string, index: ParsedIndex | undefined): { shard: string; tensor?: string } {
  if (index !== undefined) {
    for (const [tensor, shard] of index.weightMap) if (shard === name) return { shard: name, tensor };
  }
  return { shard: name };
}

/** `etag:<etag>`, or null where the source gives no version or one too long to record. */
function objectStamp(etag: string | undefined): string | null {
  if (typeof etag !== 'string' || etag.length === 0) return null;
  const stamp = `${OBJECT_STAMP_PREFIX}${etag}`;
  return stamp.length <= MAX_OBJECT_STAMP_CHARS && !stamp.includes('\0') ? stamp : null;
}

/**
 * Fills `target` from an object in pieces of at most MAX_READ_CHUNK_BYTES, as readFully does for
 * files: a source may serve readInto with one read(2), which Node refuses (or wraps) at 2 GiB.
 */
async function readObjectFully(object: ByteSourceObject, target: Uint8Array, positionBytes: number): Promise<void> {
  for (let done = 0; done < target.length; done += MAX_READ_CHUNK_BYTES) {
    await object.readInto(positionBytes + done, target.subarray(done, Math.min(target.length, done + MAX_READ_CHUNK_BYTES)));
  }
}

/**
 * Rules 19-20. Every directory on the shard's path must resolve inside the model directory (a
 * linked directory may not lead out of it); the shard file itself may be a link to a regular file
 * anywhere, which is how the Hugging Face hub cache lays out every snapshot
 * (`snapshots/<rev>/model-00001-of-00002.safetensors -> ../../blobs/<sha256>`): whoever could
 * place that link owns the directory, while the names an index gives are checked (rules 17-18b).
 */
async function resolveInside(candidate: string, rootReal: string, name: string, file: string, mode: 'index' | 'shard', index?: ParsedIndex): Promise<string> {
  const context = shardContext(name, index);
  const realOrMissing = async (path: string): Promise<string> => {
    try {
      return await realpath(path);
    } catch (cause) {
      const code = (cause as NodeJS.ErrnoException)?.code;
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') {
        // A snapshot's link to a blob not downloaded yet (or a loop): ENOENT alone read as a file not there.
        const link = path === candidate && code !== 'ENOTDIR' ? await describeBrokenLink(path) : undefined;
        const what = link === undefined ? `does not exist (${code})` : `is ${link}`;
        throw new SafetensorsError('INDEX_SHARD_MISSING', `shard ${quoteValue(name)} ${what}`, { file, cause, ...context });
      }
      return rethrowIo(cause, path);
    }
  };
  const parentReal = await realOrMissing(dirname(candidate));
  if (parentReal !== rootReal && !parentReal.startsWith(rootReal + sep)) {
    throw new SafetensorsError('INDEX_SHARD_OUTSIDE', `shard ${quoteValue(name)} lies in ${parentReal}, outside the model directory ${rootReal}`, { file, ...context });
  }
  const realPath = await realOrMissing(candidate);
  const info = await stat(realPath).catch((cause: unknown) => rethrowIo(cause, realPath));
  if (!info.isFile()) {
    throw new SafetensorsError(mode === 'index' ? 'INDEX_SHARD_MISSING' : 'NOT_SAFETENSORS', `shard ${quoteValue(name)} is not a regular file`, { file, ...context });
  }
  return realPath;
}

/**
 * Opens `path` (by `realPath`) without blocking and requires a regular file by fstat of that
 * descriptor, so what is checked is what gets read (a FIFO or directory swapped in after a stat
 * is still caught). `notAFile` makes the error, given what it is instead ("a FIFO", ...).
 */
async function openRegularFile(path: string, realPath: string, notAFile: (kind: string) => SafetensorsError): Promise<{ handle: FileHandle; info: BigIntStats }> {
  const handle = await open(realPath, OPEN_FLAGS).catch((cause: unknown) => rethrowIo(cause, path));
  try {
    const info = await handle.stat({ bigint: true });
    if (!info.isFile()) throw notAFile(describeFileKind(info));
    return { handle, info };
  } catch (error) {
    await handle.close().catch(() => undefined);
    return rethrowIo(error, path);
  }
}

function describeFileKind(info: BigIntStats): string {
  if (info.isDirectory()) return 'a directory';
  if (info.isFIFO()) return 'a FIFO';
  if (info.isSocket()) return 'a socket';
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'a device';
  return 'not a file';
}

/** `mode` and `indexPath` as for resolveInside: which code, and which file, names a shard that is not a file. */
async function openShards(locations: readonly { name: string; path: string; realPath: string }[], mode: 'index' | 'shard', indexPath?: string): Promise<OpenedShard[]> {
  const opened: OpenedShard[] = [];
  try {
    for (const location of locations) {
      const notAFile = (kind: string) =>
        new SafetensorsError(mode === 'index' ? 'INDEX_SHARD_MISSING' : 'NOT_SAFETENSORS', `shard ${quoteValue(location.name)} is ${kind}, not a regular file`, {
          file: indexPath ?? location.path,
          shard: location.name,
        });
      opened.push(await openShard(location.name, location.path, location.realPath, notAFile));
    }
  } catch (error) {
    await closeAll(opened);
    throw error;
  }
  return opened;
}

/** Rules 1-16 for one file, reading only the prefix and the (validated-length) header. */
async function openShard(name: string, path: string, realPath: string, notAFile: (kind: string) => SafetensorsError): Promise<OpenedShard> {
  // resolveInside checked it is a file, by path; this checks the descriptor itself (a swap in between).
  // Of the descriptor every read goes through, so the stamp describes the bytes served.
  const { handle, info } = await openRegularFile(path, realPath, notAFile);
  const size = Number(info.size);
  const stamp = formatFileStamp(info);
  const stampNow = () => formatFileStamp(fstatSync(handle.fd, { bigint: true }));
  let checkedAtMs = Number.NEGATIVE_INFINITY;
  let ioClosed = false;
  // Set once the header is parsed: its bytes' digest and end, and the latest stamp under which the
  // file was found to hold them (the opened one, until its ctime moves).
  const parsed: { headerDigest?: Buffer; headerEnd: number } = { headerEnd: 0 };
  let trustedStamp = stamp;
  /**
   * Whether the file at stamp `now` still holds what the model parsed. Size and mtime equal
   * (isSameFileContentStamp) leave a rewrite that restored the mtime (`cp -p`, `rsync --inplace
   * -t`, `touch -r`) undetected: its ctime is all that moved, as after a chmod, and the model
   * read tensors at its old header's offsets. So a moved ctime costs one read of the prefix and
   * header (small, once per new ctime): the same bytes, and every offset the model knows holds.
   */
  // The first stamp found with another header: the file is not the one parsed, whatever follows.
  let changedStamp: string | undefined;
  const unchangedAt = (now: string): boolean => {
    if (now === trustedStamp) return true;
    if (changedStamp !== undefined || !isSameFileContentStamp(now, stamp)) return false;
    if (parsed.headerDigest !== undefined && !parsed.headerDigest.equals(digestFileHead(handle.fd, parsed.headerEnd))) {
      changedStamp = now;
      return false;
    }
    trustedStamp = now;
    return true;
  };
  const io: ShardIo = {
    sizeBytes: size,
    stamp,
    stampNow,
    // Linux names an open descriptor's file by this magic link (statfs and realpath follow it to
    // the file itself, renamed, unlinked or lazily unmounted); elsewhere the path is what there is.
    descriptorPath: () => (ioClosed ? null : process.platform === 'linux' ? `/proc/self/fd/${handle.fd}` : path),
    headerUnchanged: () => {
      if (ioClosed) return true; // nothing to read: a closed model's requests say MODEL_CLOSED
      try {
        return unchangedAt(stampNow());
      } catch {
        return true; // fstat or read failed (closed under us, EIO): the next read says what it finds
      }
    },
    readAt: async (target, positionBytes, tensor) => {
      await readFully(handle, target, positionBytes, path, tensor);
      // After the read: a file rewritten before or during it gives bytes the header we parsed may
      // not describe, or a mix of two versions. One fstat (~3 µs here), at most once per
      // STAMP_CHECK_INTERVAL_MS per shard.
      const atMs = performance.now();
      // Closed while the read ran: the read completed on the file as opened; there is nothing to stat.
      if (ioClosed || atMs - checkedAtMs < STAMP_CHECK_INTERVAL_MS) return;
      let now: string;
      let unchanged: boolean;
      try {
        now = stampNow();
        unchanged = unchangedAt(now);
      } catch (cause) {
        return rethrowIo(cause, path);
      }
      if (!unchanged) {
        throw new SafetensorsError('SHARD_CHANGED', `shard ${quoteValue(name)} changed since the model was opened (size:mtime:ctime:inode ${stamp} -> ${now}): open the model again`, {
          file: path,
          ...(tensor !== undefined ? { tensor } : {}),
        });
      }
      checkedAtMs = atMs;
    },
    close: () => {
      ioClosed = true;
      return handle.close();
    },
  };
  const opened = await readShardHeader(name, path, io);
  opened.fileId = formatFileStamp(info);
  parsed.headerDigest = opened.headerDigest;
  parsed.headerEnd = HEADER_PREFIX_BYTES + opened.shard.headerBytes;
  return opened;
}

/**
 * After every shard is open: the index's path and each shard's path still name the file that was
 * opened, with the size and mtime it had (isSameFileIgnoringCtime: inode, size, mtime; the device
 * is left out, as file-stamp.ts does: overlayfs and old kernels report another one for fstat than
 * for stat). A sharded writer that replaced the model while it was being opened (the old index
 * read, then a shard of the new model opened beside an old one) would otherwise give a mix:
 * SHARD_CHANGED, open the model again. One stat per file, synchronous as the open's fstat and head
 * reads are: an asynchronous stat waits its turn in libuv's pool behind reads in flight (the
 * default model's loads by path were measured ~10% slower with them). A lone file without an index
 * has nothing to be mixed with. Closes on failure.
 */
async function checkStillInPlace(opened: readonly OpenedShard[], index: { path: string; fileId: string } | undefined, file: string): Promise<void> {
  if (index === undefined && opened.length <= 1) return;
  const isInPlace = (path: string, fileId: string): boolean => {
    const now = statSync(path, { bigint: true, throwIfNoEntry: false });
    return now !== undefined && isSameFileIgnoringCtime(formatFileStamp(now), fileId);
  };
  let what: string | undefined;
  try {
    if (index !== undefined && !isInPlace(index.path, index.fileId)) what = 'the index';
    for (const { shard, fileId } of opened) {
      if (what !== undefined) break;
      if (fileId !== undefined && !isInPlace(shard.path, fileId)) what = `shard ${quoteValue(shard.name)}`;
    }
  } catch {
    what = 'a file of the model';
  }
  if (what === undefined) return;
  await closeAll(opened);
  throw new SafetensorsError('SHARD_CHANGED', `${what} was replaced while the model was being opened (a writer replaced the model): open the model again`, { file });
}

/** SHA-256 of a file's first `sizeBytes` bytes, read now (short reads continued; EOF: what there is). */
function digestFileHead(fd: number, sizeBytes: number): Buffer {
  const bytes = Buffer.allocUnsafe(sizeBytes);
  let done = 0;
  while (done < sizeBytes) {
    const n = readSync(fd, bytes, done, sizeBytes - done, done);
    if (n === 0) break;
    done += n;
  }
  return createHash('sha256').update(bytes.subarray(0, done)).digest();
}

/** Rules 1-16 for one shard: the 8-byte prefix, then the header (its length validated first). Closes `io` on failure. */
async function readShardHeader(name: string, path: string, io: ShardIo): Promise<OpenedShard> {
  try {
    const size = io.sizeBytes;
    const prefix = new Uint8Array(HEADER_PREFIX_BYTES);
    const prefixBytes = Math.min(size, HEADER_PREFIX_BYTES);
    await io.readAt(prefix.subarray(0, prefixBytes), 0);
    const context = { fileName: path, fileBytes: size };
    const headerLength = parseHeaderLengthPrefix(prefix.subarray(0, prefixBytes), context);
    const headerBytes = new Uint8Array(headerLength);
    await io.readAt(headerBytes, HEADER_PREFIX_BYTES);
    const header = parseSafetensorsHeader(headerBytes, context);
    const shard: SafetensorsShard = { name, path, fileBytes: size, headerBytes: header.headerBytes, metadata: header.metadata, stamp: io.stamp };
    const headerDigest = createHash('sha256').update(prefix.subarray(0, prefixBytes)).update(headerBytes).digest();
    return { shard, io, header, headerDigest };
  } catch (error) {
    await io.close().catch(() => undefined);
    throw error;
  }
}

function buildModel(
  rootDir: string,
  indexPath: string | null,
  indexMetadata: Record<string, unknown> | null,
  opened: OpenedShard[],
  errorFile: string | null,
): SafetensorsModel {
  const tensors: TensorInfo[] = [];
  const byName = new Map<string, TensorInfo>();
  const bySlice = new Map<string, TensorInfo>();
  const shardIo = new Map<string, ShardIo>();
  for (const { shard, io, header } of opened) {
    shardIo.set(shard.name, io);
    for (const entry of header.tensors) {
      const [begin, end] = entry.dataOffsets;
      // THE slice identity (README "Slice identity"): computed here and nowhere else.
      const slice: SliceKey = { shardName: shard.name, offsetBytes: header.dataStartBytes + begin, sizeBytes: end - begin };
      const tensor: TensorInfo = { ...entry, slice, shardPath: shard.path };
      const previous = byName.get(entry.name);
      if (previous) {
        void closeAll(opened);
        throw new SafetensorsError('DUPLICATE_TENSOR_NAME', `tensor is in both ${previous.slice.shardName} and ${shard.name}`, {
          file: errorFile ?? shard.path,
          tensor: entry.name,
        });
      }
      byName.set(entry.name, tensor);
      const key = sliceKeyText(slice);
      if (!bySlice.has(key)) bySlice.set(key, tensor);
      tensors.push(tensor);
    }
  }
  let closed = false;
  let pool: Uint8Array<ArrayBuffer>[] = [];
  const reader: ModelReader = {
    takeBuffer(minBytes: number): Uint8Array<ArrayBuffer> {
      const at = pool.findIndex((buffer) => buffer.length >= minBytes);
      if (at >= 0) return pool.splice(at, 1)[0] as Uint8Array<ArrayBuffer>;
      return allocateUninitialized(minBytes);
    },
    isClosed: () => closed,
    giveBackBuffer(buffer: Uint8Array<ArrayBuffer>): void {
      if (closed || buffer.length > MAX_POOLED_BUFFER_BYTES) return;
      pool.push(buffer);
      // Keep the largest few.
      if (pool.length > MAX_POOLED_BUFFERS) pool = pool.sort((a, b) => b.length - a.length).slice(0, MAX_POOLED_BUFFERS);
    },
    stampNow(shardName: string): string | null {
      const io = shardIo.get(shardName);
      if (closed || !io) return null;
      try {
        return io.stampNow();
      } catch {
        return null; // Closed under us: the next read says so.
      }
    },
    descriptorPath(shardName: string): string | null {
      const io = shardIo.get(shardName);
      return closed || !io ? null : io.descriptorPath();
    },
    headerUnchanged(shardName: string): boolean {
      const io = shardIo.get(shardName);
      return closed || !io ? true : io.headerUnchanged();
    },
    readAt(shardName: string, target: Uint8Array, positionBytes: number, tensor?: string): Promise<void> {
      const io = shardIo.get(shardName);
      if (closed || !io) {
        throw new SafetensorsError(closed ? 'MODEL_CLOSED' : 'UNKNOWN_TENSOR', closed ? 'model is closed' : `no shard ${shardName} in this model`, { file: rootDir });
      }
      return io.readAt(target, positionBytes, tensor);
    },
  };
  const model: SafetensorsModel & { [MODEL_READER]: ModelReader } = {
    rootDir,
    indexPath,
    indexMetadata,
    shards: opened.map((o) => o.shard),
    tensors,
    getTensor: (name: string) => byName.get(name),
    findBySlice: (slice: SliceKey) => bySlice.get(sliceKeyText(slice)),
    get closed() {
      return closed;
    },
    close: async () => {
      if (closed) return;
      closed = true;
      pool = [];
      await closeAll(opened);
    },
    [MODEL_READER]: reader,
  };
  Object.defineProperty(model, MODEL_READER, { enumerable: false });
  return model;
}

function sliceKeyText(slice: SliceKey): string {
  return `${slice.shardName}\u0000${slice.offsetBytes}\u0000${slice.sizeBytes}`;
}

async function closeAll(opened: readonly OpenedShard[]): Promise<void> {
  await Promise.all(opened.map((o) => o.io.close().catch(() => undefined)));
}

async function statOrThrow(path: string) {
  try {
    return await stat(path);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException)?.code;
    // A link that leads nowhere: ls lists it, so "no such file" alone read wrong.
    const link = code === 'ENOENT' || code === 'ELOOP' ? await describeBrokenLink(path) : undefined;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new SafetensorsError('PATH_NOT_FOUND', link === undefined ? 'no such file or directory' : `no such file: it is ${link}`, { file: path, cause });
    }
    if (link !== undefined) throw new SafetensorsError('IO_ERROR', `it is ${link}`, { file: path, cause });
    return rethrowIo(cause, path);
  }
}
