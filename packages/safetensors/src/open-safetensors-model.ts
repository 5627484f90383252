import type { FileHandle } from 'node:fs/promises';
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { basename, dirname, resolve, sep } from 'node:path';
import { SafetensorsError } from './errors.js';
import { HEADER_PREFIX_BYTES, MAX_INDEX_BYTES } from './limits.js';
import { MAX_POOLED_BUFFERS, MAX_POOLED_BUFFER_BYTES, MODEL_READER, allocateUninitialized, type ModelReader } from './model-reader.js';
import { parseHeaderLengthPrefix, parseSafetensorsHeader } from './parse-safetensors-header.js';
import { parseSafetensorsIndex } from './parse-safetensors-index.js';
import { readFully } from './read-fully.js';
import type { ParsedHeader, SafetensorsModel, SafetensorsShard, SliceKey, TensorInfo } from './types.js';

const INDEX_SUFFIX = '.safetensors.index.json';
const DEFAULT_INDEX_NAME = 'model.safetensors.index.json';
const SHARD_SUFFIX = '.safetensors';

interface OpenedShard {
  shard: SafetensorsShard;
  handle: FileHandle;
  header: ParsedHeader;
}

/**
 * Opens a model: a `.safetensors` file, a directory (its `*.safetensors.index.json` if there is one,
 * else every `*.safetensors` in it, sorted by name), or an index file. Validates everything
 * (README "Validation order") before returning; the shard files stay open until close().
 */
export async function openSafetensorsModel(path: string): Promise<SafetensorsModel> {
  const absolute = resolve(path);
  const info = await statOrThrow(absolute);
  if (info.isDirectory()) {
    const names = await readdir(absolute).catch((cause: unknown) => rethrowIo(cause, absolute));
    const indexNames = names.filter((name) => name.endsWith(INDEX_SUFFIX)).sort();
    const indexName = indexNames.includes(DEFAULT_INDEX_NAME) ? DEFAULT_INDEX_NAME : indexNames.length === 1 ? indexNames[0] : undefined;
    if (indexName !== undefined) return openIndexedModel(resolve(absolute, indexName));
    if (indexNames.length > 1) {
      throw new SafetensorsError('NOT_SAFETENSORS', `directory holds several index files (${indexNames.join(', ')}); open one of them`, { file: absolute });
    }
    const shardNames = names.filter((name) => name.endsWith(SHARD_SUFFIX)).sort();
    if (shardNames.length === 0) {
      throw new SafetensorsError('NOT_SAFETENSORS', 'directory holds no .safetensors file and no index', { file: absolute });
    }
    const rootReal = await realpath(absolute).catch((cause: unknown) => rethrowIo(cause, absolute));
    const locations: { name: string; path: string; realPath: string }[] = [];
    for (const name of shardNames) {
      const candidate = resolve(absolute, name);
      const realPath = await resolveInside(candidate, rootReal, name, candidate, 'shard');
      locations.push({ name, path: candidate, realPath });
    }
    return buildModel(absolute, null, null, await openShards(locations), null);
  }
  if (!info.isFile()) {
    throw new SafetensorsError('NOT_SAFETENSORS', 'path is neither a file nor a directory', { file: absolute });
  }
  if (absolute.endsWith('.json')) return openIndexedModel(absolute);
  const rootDir = dirname(absolute);
  const realPath = await realpath(absolute).catch((cause: unknown) => rethrowIo(cause, absolute));
  return buildModel(rootDir, null, null, await openShards([{ name: basename(absolute), path: absolute, realPath }]), null);
}

async function openIndexedModel(indexPath: string): Promise<SafetensorsModel> {
  const rootDir = dirname(indexPath);
  const handle = await open(indexPath, 'r').catch((cause: unknown) => rethrowIo(cause, indexPath));
  let bytes: Uint8Array;
  try {
    const { size } = await handle.stat();
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
    await handle.close();
  }
  const index = parseSafetensorsIndex(bytes, indexPath);
  const rootReal = await realpath(rootDir).catch((cause: unknown) => rethrowIo(cause, rootDir));
  const locations: { name: string; path: string; realPath: string }[] = [];
  for (const name of index.shardNames) {
    const candidate = resolve(rootDir, name);
    const realPath = await resolveInside(candidate, rootReal, name, indexPath, 'index');
    locations.push({ name, path: candidate, realPath });
  }
  const opened = await openShards(locations);
  try {
    // Rules 22-23: weight_map and the shards' headers must agree exactly.
    const namesByShard = new Map<string, Set<string>>();
    for (const { shard, header } of opened) {
      const names = new Set<string>();
      for (const tensor of header.tensors) {
        const listed = index.weightMap.get(tensor.name);
        if (listed !== shard.name) {
          throw new SafetensorsError(
            'INDEX_TENSOR_UNLISTED',
            listed === undefined ? `tensor of shard ${shard.name} is missing from weight_map` : `tensor of shard ${shard.name} is listed under shard ${listed}`,
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
  return buildModel(rootDir, indexPath, index.metadata, opened, indexPath);
}

/** Rules 19-20: the real path (links resolved) must exist, be a regular file, and stay under rootReal. */
async function resolveInside(candidate: string, rootReal: string, name: string, file: string, mode: 'index' | 'shard'): Promise<string> {
  let realPath: string;
  try {
    realPath = await realpath(candidate);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException)?.code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') {
      throw new SafetensorsError('INDEX_SHARD_MISSING', `shard ${JSON.stringify(name)} does not exist (${code})`, { file, cause });
    }
    rethrowIo(cause, candidate);
  }
  if (!realPath.startsWith(rootReal + sep)) {
    throw new SafetensorsError('INDEX_SHARD_OUTSIDE', `shard ${JSON.stringify(name)} resolves to ${realPath}, outside the model directory ${rootReal}`, { file });
  }
  const info = await stat(realPath).catch((cause: unknown) => rethrowIo(cause, realPath));
  if (!info.isFile()) {
    throw new SafetensorsError(mode === 'index' ? 'INDEX_SHARD_MISSING' : 'NOT_SAFETENSORS', `shard ${JSON.stringify(name)} is not a regular file`, { file });
  }
  return realPath;
}

async function openShards(locations: readonly { name: string; path: string; realPath: string }[]): Promise<OpenedShard[]> {
  const opened: OpenedShard[] = [];
  try {
    for (const location of locations) opened.push(await openShard(location.name, location.path, location.realPath));
  } catch (error) {
    await closeAll(opened);
    throw error;
  }
  return opened;
}

/** Rules 1-16 for one file, reading only the prefix and the (validated-length) header. */
async function openShard(name: string, path: string, realPath: string): Promise<OpenedShard> {
  const handle = await open(realPath, 'r').catch((cause: unknown) => rethrowIo(cause, path));
  try {
    const { size } = await handle.stat();
    const prefix = new Uint8Array(HEADER_PREFIX_BYTES);
    const prefixBytes = Math.min(size, HEADER_PREFIX_BYTES);
    await readFully(handle, prefix.subarray(0, prefixBytes), 0, path);
    const context = { fileName: path, fileBytes: size };
    const headerLength = parseHeaderLengthPrefix(prefix.subarray(0, prefixBytes), context);
    const headerBytes = new Uint8Array(headerLength);
    await readFully(handle, headerBytes, HEADER_PREFIX_BYTES, path);
    const header = parseSafetensorsHeader(headerBytes, context);
    const shard: SafetensorsShard = { name, path, fileBytes: size, headerBytes: header.headerBytes, metadata: header.metadata };
    return { shard, handle, header };
  } catch (error) {
    await handle.close().catch(() => undefined);
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
  const handles = new Map<string, FileHandle>();
  for (const { shard, handle, header } of opened) {
    handles.set(shard.name, handle);
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
  let pool: Uint8Array[] = [];
  const reader: ModelReader = {
    takeBuffer(minBytes: number): Uint8Array {
      const at = pool.findIndex((buffer) => buffer.length >= minBytes);
      if (at >= 0) return pool.splice(at, 1)[0] as Uint8Array;
      return allocateUninitialized(minBytes);
    },
    giveBackBuffer(buffer: Uint8Array): void {
      if (closed || buffer.length > MAX_POOLED_BUFFER_BYTES) return;
      pool.push(buffer);
      // Keep the largest few.
      if (pool.length > MAX_POOLED_BUFFERS) pool = pool.sort((a, b) => b.length - a.length).slice(0, MAX_POOLED_BUFFERS);
    },
    handleOf(shardName: string): FileHandle {
      const handle = handles.get(shardName);
      if (closed || !handle) {
        throw new SafetensorsError(closed ? 'MODEL_CLOSED' : 'UNKNOWN_TENSOR', closed ? 'model is closed' : `no shard ${shardName} in this model`, { file: rootDir });
      }
      return handle;
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
  await Promise.all(opened.map((o) => o.handle.close().catch(() => undefined)));
}

async function statOrThrow(path: string) {
  try {
    return await stat(path);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException)?.code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new SafetensorsError('PATH_NOT_FOUND', 'no such file or directory', { file: path, cause });
    }
    return rethrowIo(cause, path);
  }
}

function rethrowIo(cause: unknown, file: string): never {
  if (cause instanceof SafetensorsError) throw cause;
  const code = (cause as NodeJS.ErrnoException)?.code ?? 'unknown';
  throw new SafetensorsError('IO_ERROR', `file system error ${code}: ${cause instanceof Error ? cause.message : String(cause)}`, { file, cause });
}
