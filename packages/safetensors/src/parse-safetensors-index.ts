import { checkByteArray } from './check-byte-array.js';
import { checkStringArgument } from './check-header-arguments.js';
import { SafetensorsError } from './errors.js';
import { findDuplicateJsonKey } from './find-duplicate-json-key.js';
import { findLoneSurrogateString } from './find-lone-surrogate.js';
import { MAX_INDEX_BYTES } from './limits.js';
import { quoteValue } from './quote-value.js';

/** A validated model.safetensors.index.json (before the shards are looked at). */
export interface ParsedIndex {
  /** tensor name -> shard name, in file order. */
  weightMap: Map<string, string>;
  /** Distinct shard names, sorted (HF numbering makes this the shard order). */
  shardNames: string[];
  /** The `metadata` object as stored, or null. */
  metadata: Record<string, unknown> | null;
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Parses and validates an index file's bytes: size limit, UTF-8, JSON object, no duplicate keys,
 * `weight_map` an object of strings, `metadata` an object if present, and each shard name a relative
 * path that cannot leave the model directory lexically (rules 17-18; links are checked by the opener).
 */
export function parseSafetensorsIndex(bytes: Uint8Array, fileName: string): ParsedIndex {
  checkStringArgument(fileName, 'fileName');
  const file = fileName;
  checkByteArray(bytes, 'bytes', file);
  if (bytes.length > MAX_INDEX_BYTES) {
    throw new SafetensorsError('INDEX_TOO_LARGE', `index has ${bytes.length} bytes, over MAX_INDEX_BYTES (${MAX_INDEX_BYTES})`, {
      file,
      offsets: { expected: MAX_INDEX_BYTES, actual: bytes.length },
    });
  }
  let text: string;
  try {
    text = utf8Decoder.decode(bytes);
  } catch (cause) {
    throw new SafetensorsError('INDEX_INVALID_UTF8', 'index is not valid UTF-8', { file, cause });
  }
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (cause) {
    throw new SafetensorsError('INDEX_INVALID_JSON', `index is not JSON (${cause instanceof Error ? cause.message : String(cause)})`, { file, cause });
  }
  const lone = findLoneSurrogateString(text, root);
  if (lone !== undefined) {
    throw new SafetensorsError('INDEX_INVALID_JSON', `index is not JSON text: string ${quoteValue(lone)} holds a lone surrogate escape`, { file });
  }
  if (root === null || typeof root !== 'object' || Array.isArray(root)) {
    throw new SafetensorsError('INDEX_NOT_OBJECT', 'index is not a JSON object', { file });
  }
  const duplicate = findDuplicateJsonKey(text);
  if (duplicate) {
    // Only a key of weight_map is a tensor name.
    const inWeightMap = duplicate.path.length === 1 && duplicate.path[0] === 'weight_map';
    throw new SafetensorsError('INDEX_DUPLICATE_KEY', `key ${quoteValue(duplicate.key)} appears twice in one object of the index`, {
      file,
      ...(inWeightMap ? { tensor: duplicate.key } : {}),
      key: duplicate.key,
      offsets: { position: duplicate.position },
    });
  }
  const record = root as Record<string, unknown>;
  const weightMapValue = record.weight_map;
  if (!Object.hasOwn(record, 'weight_map') || weightMapValue === null || typeof weightMapValue !== 'object' || Array.isArray(weightMapValue)) {
    throw new SafetensorsError('INDEX_INVALID', 'index has no weight_map object', { file });
  }
  let metadata: Record<string, unknown> | null = null;
  if (Object.hasOwn(record, 'metadata') && record.metadata !== null) {
    const value = record.metadata;
    if (typeof value !== 'object' || Array.isArray(value)) {
      throw new SafetensorsError('INDEX_INVALID', 'index metadata is not an object', { file });
    }
    metadata = value as Record<string, unknown>;
  }
  const weightMap = new Map<string, string>();
  const shards = new Set<string>();
  for (const [tensor, shard] of Object.entries(weightMapValue as Record<string, unknown>)) {
    if (typeof shard !== 'string') {
      throw new SafetensorsError('INDEX_INVALID', `weight_map value is ${typeof shard}, not a shard name`, { file, tensor });
    }
    if (!shards.has(shard)) {
      checkShardName(shard, file, tensor);
      shards.add(shard);
    }
    weightMap.set(tensor, shard);
  }
  return { weightMap, shardNames: [...shards].sort(), metadata };
}

/** Rules 17, 18, 18b: a relative path of plain segments, no way up. */
export function checkShardName(shard: string, file: string, tensor: string): void {
  const shown = quoteValue(shard);
  if (shard.startsWith('/') || /^[A-Za-z]:/.test(shard)) {
    throw new SafetensorsError('INDEX_SHARD_ABSOLUTE', `shard name ${shown} is an absolute path`, { file, tensor });
  }
  const segments = shard.split('/');
  if (segments.includes('..')) {
    throw new SafetensorsError('INDEX_SHARD_TRAVERSAL', `shard name ${shown} climbs out of the model directory with ..`, { file, tensor });
  }
  if (shard.length === 0 || shard.includes('\0') || shard.includes('\\')) {
    throw new SafetensorsError('INDEX_SHARD_INVALID_NAME', `shard name ${shown} is empty or holds a NUL or a backslash`, { file, tensor });
  }
  if (segments.some((segment) => segment === '' || segment === '.')) {
    throw new SafetensorsError('INDEX_SHARD_INVALID_NAME', `shard name ${shown} has an empty or "." segment`, { file, tensor });
  }
}
