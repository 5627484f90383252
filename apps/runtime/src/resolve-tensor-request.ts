import { isSameFileContentStamp, isSameFileIgnoringCtime, isShardHeaderUnchanged, readFileStamp, readShardDescriptorPath, readShardStamp, type SafetensorsModel, type SliceKey, type TensorInfo } from '@splitzip/safetensors';
import { findClosestName } from '@splitzip/codec/internal';
import { classifyBinding, isStoreError, shardStampKind, type SliceBinding } from '@splitzip/store';
import { weakFileSystemOf } from './detect-weak-file-system.js';
import { findBoundSlice, isKnownMatch, isKnownMismatch, mayBindBeside } from './check-source-bytes.js';
import { RuntimeError } from './errors.js';
import { describeOpenedModel } from './describe-opened-model.js';
import { describeTensorRequest } from './describe-tensor-request.js';
import { checkModelArgument, checkSliceNumber, cutBounded } from './check-load-arguments.js';
import type { ShardCache } from './open-shard-cache.js';
import { listSliceBindings } from './list-slice-bindings.js';
import { entryDescribesTensor } from './entry-describes-tensor.js';
import type { ServeTarget } from './serve-tensor.js';

/**
 * Which tensor to load:
 * - `{ model, name }`: a tensor of an open model, by name;
 * - `{ model, slice }` or a bare `SliceKey` with `options.model`: by slice identity;
 * - a bare `SliceKey` without a model: served from the cache entry aliased to it (no raw fallback).
 */
export type TensorRequest = SliceKey | { model: SafetensorsModel; name: string } | { model: SafetensorsModel; slice: SliceKey };

function isSliceKey(value: unknown): value is SliceKey {
  const v = value as Partial<SliceKey>;
  return typeof v?.shardName === 'string' && typeof v.offsetBytes === 'number' && typeof v.sizeBytes === 'number';
}

const NO_BYTES = new Uint8Array(0);

/** Each open model's shard stamps by shard name (SafetensorsShard.stamp), built on first use. */
const shardStamps = new WeakMap<SafetensorsModel, Map<string, string | null>>();

function shardStampOf(model: SafetensorsModel, shardName: string): string | null {
  let stamps = shardStamps.get(model);
  if (stamps === undefined) {
    stamps = new Map(model.shards.map((shard) => [shard.name, shard.stamp ?? null]));
    shardStamps.set(model, stamps);
  }
  return stamps.get(shardName) ?? null;
}

/**
 * Throws SHARD_CHANGED when the shard's file was rewritten in place since `model` was opened: the
 * header the model parsed may not describe it, and a binding's stamp check would compare against
 * the stamp of a file that is gone. One fstat of the model's descriptor. Returns the shard's stamp
 * now (what a binding is judged by: a chmod, or a rewrite that restored the mtime, moved its ctime
 * only, and the bytes are checked again), or the stamp it was opened with where none can be read.
 */
export function checkShardUnchanged(model: SafetensorsModel, shardName: string, tensor: string): string | null {
  const opened = shardStampOf(model, shardName);
  if (opened === null) return null;
  let now: string | null;
  try {
    now = readShardStamp(model, shardName);
  } catch {
    return opened; // Not a model openSafetensorsModel made (a wrapper): no descriptor here; its reads say what they find.
  }
  // No stamp now: the model was closed, or the fstat failed (ESTALE, EIO on network storage: the
  // read then says what it finds). Only a closed model has no descriptor left (checkModelOpen).
  if (now === null) {
    if (shardStampKind(opened) === 'file') checkModelOpen(model, shardName, tensor);
    return opened;
  }
  // Its ctime left out: a chmod under the open model changes no byte (isSameFileContentStamp). A
  // moved ctime is also what a rewrite that restored the mtime leaves (`cp -p`, `rsync --inplace
  // -t`): its header is read again then (once per new ctime), or the tensor was read at the old
  // header's offsets.
  if (isSameFileContentStamp(now, opened) && (now === opened || isShardHeaderUnchanged(model, shardName))) return now;
  throw new RuntimeError('SHARD_CHANGED', `shard ${shardName} was rewritten since the model was opened (size:mtime:ctime:inode ${opened} -> ${now}): open the model again`, {
    tensor,
    shard: shardName,
    modelRoot: model.rootDir,
    openedStamp: opened,
    currentStamp: now,
  });
}

/** MODEL_CLOSED for a request through `model` after its close(). */
export function modelClosedError(model: SafetensorsModel, tensor: string, cause?: unknown): RuntimeError {
  const opened = describeOpenedModel(model);
  return new RuntimeError('MODEL_CLOSED', `cannot load ${tensor}: the ${opened.text} is closed (open it again)`, { tensor, modelRoot: model.rootDir, modelPath: opened.modelPath }, cause === undefined ? undefined : { cause });
}

/**
 * Throws MODEL_CLOSED when `model` was closed: served from the cache, a tensor was otherwise
 * still loaded through a closed handle, unchecked against its shard (a file rewritten since gave
 * its old bytes), while its raw read failed. A model of local files says so without a system call
 * (`model.closed`, which every model openSafetensorsModel makes has, a ByteSource's (s3://) too);
 * a wrapper without it is asked for its descriptor's path (gone once closed).
 */
export function checkModelOpen(model: SafetensorsModel, shardName: string, tensor: string): void {
  if (model.closed === true) throw modelClosedError(model, tensor);
  const opened = shardStampOf(model, shardName);
  if (opened === null || shardStampKind(opened) !== 'file') return;
  let path: string | null;
  try {
    path = readShardDescriptorPath(model, shardName);
  } catch {
    return; // Not a model openSafetensorsModel made (a wrapper): its reads say what they find.
  }
  if (path === null) throw modelClosedError(model, tensor);
}

/**
 * Throws SHARD_CHANGED when the file now at the shard's path is not the one `model` opened: what a
 * reader that opens files by path (a custom `reader`) reads after a rename or an in-place rewrite.
 * One stat of the path.
 */
export function checkShardPathUnchanged(model: SafetensorsModel, shardName: string, path: string, tensor: string): void {
  const opened = shardStampOf(model, shardName);
  if (opened === null) return;
  const now = readFileStamp(path);
  // The inode too: another file at the path (an extracted copy, say) may have this one's size and
  // mtime, and a reader by path would read its bytes. Not the ctime: a chmod changes no byte.
  // null: gone or unreadable; the read itself reports it. A moved ctime: the header is read again
  // through the model's descriptor (the same file: its inode is the one the model holds open).
  if (now === null || (isSameFileIgnoringCtime(now, opened) && (now === opened || isShardHeaderUnchanged(model, shardName)))) return;
  throw new RuntimeError('SHARD_CHANGED', `the file at ${path} (shard ${shardName}) is not the one the model opened (size:mtime:ctime:inode ${opened} -> ${now}): open the model again`, {
    tensor,
    shard: shardName,
    path,
    modelRoot: model.rootDir,
    openedStamp: opened,
    currentStamp: now,
  });
}

/**
 * `checkedShards`: shards already checked by this call, with their stamps now (loadModel resolves
 * every tensor at once: one fstat per shard, not per tensor, at ~3 µs each on this VM; its raw
 * reads check again).
 */
export function targetFromInfo(model: SafetensorsModel, info: TensorInfo, cache: ShardCache | undefined, checkedShards?: Map<string, string | null>): ServeTarget {
  const { shardName, offsetBytes, sizeBytes } = info.slice;
  let current = checkedShards?.get(shardName);
  if (current === undefined) {
    current = checkShardUnchanged(model, shardName, info.name);
    checkedShards?.set(shardName, current);
  }
  const target: ServeTarget = { name: info.name, dtype: info.dtype, shape: info.shape, slice: info.slice, model, info, entry: undefined };
  if (cache === undefined) return target;
  // A zero-byte slice is shared by every empty tensor at its offset, whatever its shape or dtype:
  // it names none of them (builders do not alias it; older ones bound it to the first). Such a
  // tensor is found by its content key instead, which costs nothing to compute.
  if (sizeBytes === 0) {
    if (info.dtype === 'BF16') target.entry = cache.lookup(NO_BYTES, info.shape, 'BF16');
    return target;
  }
  // The binding of this file (its stamp recorded with it) where the slice has one per file (a local
  // cache holding revisions of one model side by side), else the latest.
  const binding = current === null ? cache.lookupSliceBinding(shardName, offsetBytes, sizeBytes) : cache.lookupSliceBinding(shardName, offsetBytes, sizeBytes, current);
  if (binding === undefined) {
    // A stamp that proves nothing (a weak file system) is never recorded with a binding.
    if (current !== null && (shardStampKind(current) !== 'file' || weakFileSystemOf(model, shardName) === undefined)) {
      // Found to hold an entry's bytes by an earlier load through this store: as bound (its record may be under way, or have failed).
      const key = findBoundSlice(cache.store, shardName, offsetBytes, sizeBytes, current);
      const found = key === undefined ? undefined : cache.getEntry(key);
      if (found !== undefined && entryDescribesTensor(found, target)) target.entry = found;
      else target.unboundStamp = current;
    }
    return target;
  }
  const kind = current === null ? undefined : shardStampKind(current);
  const policy = kind === 'object' ? cache.objectSources : cache.fileSources;
  // A file on a file system whose metadata cannot tell two files apart (two squashfs images of one
  // layout give their files one stamp): no stamp is proof; checked at every load (unless the cache
  // trusts files), never recorded.
  const onWeak = kind === 'file' ? weakFileSystemOf(model, shardName) : undefined;
  const weak = onWeak !== undefined && policy !== 'trust';
  if (current === null) {
    // No stamp (a ByteSource without an ETag, a wrapper's model): nothing picks this file's binding,
    // and the latest is any file's (revisions side by side). Of a slice with several bindings, the
    // bytes are checked against every one at every load, and nothing recorded (no stamp to record).
    // So is a single binding recorded only from local files: another revision's, where this one's
    // entry is unbound (a skipped tensor, an unbind, an eviction), unless the cache trusts objects
    // (STAMPLESS_TRUST: a stampless shard is one whose source gives no ETag).
    const several = severalBindingsOf(cache, binding, shardName, offsetBytes, sizeBytes);
    // A single binding served unchecked only where its entry can hold this tensor: another shape or
    // dtype is another model's tensor at the slice, stale (uncheckEvery), not a damaged cache's
    // CACHE_ENTRY_MISMATCH (with 'trust', or a binding with an object stamp, it was served and failed).
    if (several !== undefined) uncheckEvery(target, several);
    else if ((isFromFilesOnly(binding) && cache.objectSources !== 'trust') || !entryDescribesTensor(binding.entry, target)) uncheckEvery(target, [binding]);
    else target.entry = binding.entry;
    return target;
  }
  if (!weak && classifyBinding(binding, current) === 'trusted') {
    target.entry = binding.entry;
    return target;
  }
  // This file or object, at this stamp, was found by this store to hold an entry's bytes, of this
  // tensor's name (rebindFoundSlice, or bindFoundSlice before another writer bound the slice):
  // served from that entry, whatever the binding says until its record lands. Not on a weak file
  // system, whose stamps name other files too (nothing is remembered by them).
  if (onWeak === undefined) {
    const key = findBoundSlice(cache.store, shardName, offsetBytes, sizeBytes, current);
    const found = key === undefined ? undefined : cache.getEntry(key);
    if (found !== undefined && entryDescribesTensor(found, target)) {
      target.entry = found;
      return target;
    }
  }
  // A file or object the binding has no record of: read raw and checked once, unless the cache
  // trusts shards of its kind. 'trust' is the rule from before checks: it serves a binding with no
  // record of that kind of shard, never a file binding recorded against other files (it was
  // `stale`, raw: a model rewritten in place must not get its old bytes); such a binding is checked.
  const hasFileStamps = binding.stamps.some((stamp) => shardStampKind(stamp) === 'file');
  // Not of a slice with several bindings (one per file): the latest is any file's, and trust picks
  // none of them; its bytes are checked as below (and the stamp recorded with its binding).
  // Not where its entry cannot hold this tensor (another shape or dtype): checked below, stale unhashed.
  if (policy === 'trust' && (kind === 'object' || !hasFileStamps) && entryDescribesTensor(binding.entry, target) && severalBindingsOf(cache, binding, shardName, offsetBytes, sizeBytes) === undefined) {
    target.entry = binding.entry;
    return target;
  }
  // Every binding of the slice is a candidate (one per file: this file's bytes may be any
  // revision's), the one looked up first.
  const all = listSliceBindings(cache, shardName, offsetBytes, sizeBytes);
  const bindings = all.some((other) => other.entry.key === binding.entry.key) ? all : [binding, ...all];
  const recorded = bindings.length === 1 ? binding.stamps : bindings.flatMap((other) => other.stamps);
  // Another dtype or shape at the slice (another model's tensor): not the entry's bytes, and no
  // content key of it to compute (the key is of BF16 bytes of one shape). Non-BF16: reason `dtype`.
  const candidates = bindings.filter((other) => entryDescribesTensor(other.entry, target));
  // Checked through this store before and found to hold other bytes than every candidate's entry:
  // raw, without hashing again. (Not on a weak file system: the same stamp names other files there.)
  const checked = (key: string) => ({ key, shardName, offsetBytes, sizeBytes, stamp: current });
  // Bound only to other files' entries of another dtype or shape, in a cache that keeps one binding
  // per file: as unbound for this file (its bytes are looked up by content key, and a binding of its
  // own is added beside theirs: explainMiss). Left `stale` unhashed, it stayed so at every load while
  // the other revision's binding stays (gc --model keeps other files' bindings).
  // Only in a cache holding several bindings already (format 3): a load's first would move it there.
  // An s3:// cache likewise for an object's stamp among bindings with object stamps, where cache.json
  // is format 2 (allowsSeveralBindings: it stays 2 after an unbind or gc, with none held).
  // A directory cache: an object's stamp too, among bindings with stamps (format 4 held: FILE-BINDINGS.md phase 3).
  if (candidates.length === 0 && onWeak === undefined && mayBindBeside(cache, current, bindings) === 'beside') {
    target.unboundStamp = current;
    return target;
  }
  if (candidates.length === 0 || (onWeak === undefined && candidates.every((other) => isKnownMismatch(cache.store, checked(other.entry.key))))) {
    target.staleStamp = { recorded, current, found: candidates.length > 0 ? 'checked' : 'shape', bindings: bindings.length };
    return target;
  }
  // Checked through this store before and found to be a candidate's entry's bytes: as a recorded stamp.
  const known = onWeak === undefined ? candidates.find((other) => isKnownMatch(cache.store, checked(other.entry.key))) : undefined;
  if (known !== undefined) {
    target.entry = known.entry;
    return target;
  }
  target.unchecked = { entry: candidates[0]!.entry, stamp: current, recorded, candidates: candidates.map((other) => other.entry), bindings: bindings.length, ...(onWeak !== undefined ? { weak: onWeak } : {}) };
  return target;
}

/** Every binding of the slice (`binding`, the one looked up, among them) where it has more than one; else undefined. */
function severalBindingsOf(cache: ShardCache, binding: SliceBinding, shardName: string, offsetBytes: number, sizeBytes: number): readonly SliceBinding[] | undefined {
  const all = listSliceBindings(cache, shardName, offsetBytes, sizeBytes);
  const bindings = all.some((other) => other.entry.key === binding.entry.key) ? all : [binding, ...all];
  return bindings.length > 1 ? bindings : undefined;
}

/** Whether a binding was recorded only from local files: one stamp or more, each a file stamp (none an object's, nor none at all: a legacy or stampless alias). */
function isFromFilesOnly(binding: SliceBinding): boolean {
  return binding.stamps.length > 0 && binding.stamps.every((stamp) => shardStampKind(stamp) === 'file');
}

/**
 * A tensor whose shard has no stamp, at a slice with several bindings (or one recorded only from
 * local files: isFromFilesOnly): read raw and checked against
 * every binding's entry that describes it (checkSourceBytes), at every load; nothing is recorded or
 * remembered (no stamp names the file). No candidate of its shape or dtype: `stale` (or `dtype`)
 * unhashed, as a stamped shard's is; it was reported `missing` ("no entry for this slice") though
 * the slice is bound.
 */
function uncheckEvery(target: ServeTarget, bindings: readonly SliceBinding[]): void {
  const candidates = bindings.filter((other) => entryDescribesTensor(other.entry, target));
  const recorded = bindings.flatMap((other) => other.stamps);
  if (candidates.length === 0) target.staleStamp = { recorded, current: null, found: 'shape', bindings: bindings.length };
  else target.unchecked = { entry: candidates[0]!.entry, stamp: null, recorded, candidates: candidates.map((other) => other.entry), bindings: bindings.length };
}

/** `modelOption`: where the caller passed `model`, as errors name it (`request.model` or `options.model`). */
function resolveSlice(slice: SliceKey, model: SafetensorsModel | undefined, cache: ShardCache | undefined, modelOption: 'request.model' | 'options.model'): ServeTarget {
  checkSliceNumber(slice.offsetBytes, 'offsetBytes');
  checkSliceNumber(slice.sizeBytes, 'sizeBytes');
  if (model !== undefined) checkModelArgument(model, modelOption);
  // The shard name cut as describeValue cuts a string: a caller's 1 MB name made a 1 MB message.
  const shard = cutBounded(slice.shardName);
  const where = `${shard}@${slice.offsetBytes}+${slice.sizeBytes}`;
  if (model !== undefined) {
    const info = model.findBySlice(slice);
    if (info !== undefined) return targetFromInfo(model, info, cache);
    if (!model.shards.some((shard) => shard.name === slice.shardName)) {
      const opened = describeOpenedModel(model);
      const near = findClosestName(slice.shardName, model.shards.map((shard) => shard.name));
      throw new RuntimeError('SHARD_NOT_FOUND', `${opened.text} has no shard named ${shard}${near === undefined ? '' : `: did you mean ${near}?`}`, {
        ...slice,
        modelRoot: model.rootDir,
        modelPath: opened.modelPath,
        ...(near === undefined ? {} : { suggestion: near }),
      });
    }
    throw new RuntimeError('SLICE_NOT_FOUND', `slice ${where} matches no tensor of shard ${shard}`, { ...slice });
  }
  const entry = lookupSlice(cache, slice, where);
  if (entry !== undefined && cache !== undefined) checkOneBinding(cache, slice, where);
  if (entry === undefined) {
    throw new RuntimeError('SLICE_NOT_FOUND', `slice ${where} matches no cache entry, and no model was given to read it raw`, { ...slice });
  }
  return { name: entry.qualname, dtype: entry.dtype, shape: entry.shape, slice, model: undefined, info: undefined, entry };
}

/**
 * The cache entry bound to a caller's slice. The store refuses a shard name no slice key can have
 * (empty, over its length limit, a NUL: INVALID_ARGUMENT): a RuntimeError here, as every error of
 * this package is, where a StoreError escaped (it was a quiet miss before the store checked).
 */
function lookupSlice(cache: ShardCache | undefined, slice: SliceKey, where: string): ReturnType<ShardCache['lookupBySlice']> {
  try {
    return cache?.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes);
  } catch (error) {
    if (!isStoreError(error, 'INVALID_ARGUMENT')) throw error;
    throw new RuntimeError('INVALID_ARGUMENT', `slice ${where}: ${error.message}`, { ...slice }, { cause: error });
  }
}

/**
 * A bare slice request names no file, so no stamp picks a binding: of a slice bound to several
 * entries (one per file: revisions of a model side by side in a local cache) the latest is any
 * revision's bytes, and serving it answers another revision's tensor. SLICE_AMBIGUOUS instead,
 * naming the slice, how many bindings it has and their entries; with the model the file's stamp
 * picks its own.
 */
function checkOneBinding(cache: ShardCache, slice: SliceKey, where: string): void {
  const bindings = listSliceBindings(cache, slice.shardName, slice.offsetBytes, slice.sizeBytes);
  if (bindings.length <= 1) return;
  const keys = bindings.map((binding) => binding.entry.key);
  throw new RuntimeError(
    'SLICE_AMBIGUOUS',
    `slice ${where} has ${bindings.length} bindings, one per file (revisions of a model sharing the cache: entries ${keys.join(', ')}), and a bare slice request names no file to pick one: pass the model (\`{ model, slice }\`, or options.model), whose shard file's stamp picks its own binding`,
    { ...slice, bindings: bindings.length, keys },
  );
}

export function resolveTensorRequest(
  request: TensorRequest,
  model: SafetensorsModel | undefined,
  cache: ShardCache | undefined,
): ServeTarget {
  if (typeof request !== 'object' || request === null) {
    throw invalidRequestError(request);
  }
  if (isSliceKey(request)) return resolveSlice(request, model, cache, 'options.model');
  if ('slice' in request && isSliceKey(request.slice)) return resolveSlice(request.slice, request.model, cache, 'request.model');
  if ('name' in request && typeof request.name === 'string' && request.model !== undefined) {
    checkModelArgument(request.model, 'request.model');
    const info = request.model.getTensor(request.name);
    if (info === undefined) {
      const opened = describeOpenedModel(request.model);
      // The nearest name a typo likely meant (as the CLI suggests options), only on this error path.
      const near = findClosestName(request.name, request.model.tensors.map((t) => t.name));
      throw new RuntimeError('TENSOR_NOT_FOUND', `${opened.text} has no tensor named ${showTensorName(request.name)}${near === undefined ? '' : `: did you mean ${near}?`}`, {
        tensor: request.name,
        modelRoot: request.model.rootDir,
        modelPath: opened.modelPath,
        ...(near === undefined ? {} : { suggestion: near }),
      });
    }
    return targetFromInfo(request.model, info, cache);
  }
  throw invalidRequestError(request);
}

/**
 * Characters of a requested tensor name a message shows: real names, TF-style paths included, are
 * under ~250 and shown whole (a typo must be visible); a caller's 1 MB string made a 1 MB message.
 */
const MAX_SHOWN_TENSOR_NAME_CHARS = 512;

/** A requested tensor name for a message: whole, or cut with its length (details.tensor keeps it whole). */
function showTensorName(name: string): string {
  if (name.length <= MAX_SHOWN_TENSOR_NAME_CHARS) return name;
  const last = name.charCodeAt(MAX_SHOWN_TENSOR_NAME_CHARS - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? MAX_SHOWN_TENSOR_NAME_CHARS - 1 : MAX_SHOWN_TENSOR_NAME_CHARS; // not between a surrogate pair's halves
  return `${name.slice(0, end)}... (${name.length} characters)`;
}

/** INVALID_ARGUMENT for a request of none of the accepted shapes, naming what was received. */
function invalidRequestError(request: unknown): RuntimeError {
  const { received, hint } = describeTensorRequest(request);
  return new RuntimeError('INVALID_ARGUMENT', `a tensor request is a SliceKey, { model, name } or { model, slice }, got ${received}${hint}`, { option: 'request', received });
}
