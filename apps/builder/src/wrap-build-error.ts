import { realpathSync } from 'node:fs';
import { basename, isAbsolute, relative, resolve } from 'node:path';
import { isS3Url, isStoreError, shardStampKind, type StoreError } from '@splitzip/store';
import { parseFileStamp, SafetensorsError } from '@splitzip/safetensors';
import { describeSystemCode, NO_SPACE_CODES, systemErrorCode } from './describe-error.js';
import { BuilderError } from './errors.js';
import { describeModelObjectChanged } from './open-builder-model.js';

const NOT_WRITABLE_CODES = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOTDIR', 'EEXIST', 'EISDIR']);
/**
 * The store's failures that are about the cache, not the tensor in flight, pass through as they
 * are: S3's (the endpoint or bucket) and LOCK_TIMEOUT (another writer holds the lock). As
 * TENSOR_FAILED their code was lost to a script that branches on it.
 */
const CACHE_WIDE_CODES = new Set(['S3_UNAVAILABLE', 'S3_ERROR', 'LOCK_TIMEOUT']);
/**
 * The errnos that say the cache cannot be written at all, whichever write met them (a blob's with
 * a tensor in flight, the lock file's): NOT_WRITABLE. The store's IO_ERROR carries them in its
 * cause (and details.errno). ENOTDIR, EEXIST, EISDIR are the directory's own only when making it.
 */
const CACHE_NOT_WRITABLE_CODES = new Set(['EACCES', 'EPERM', 'EROFS']);
/** What V8 and WebAssembly say (a RangeError) when a buffer or memory cannot be reserved. */
const OUT_OF_MEMORY_MESSAGE = /Array buffer allocation failed|could not allocate memory|Out of memory/i;

export interface BuildErrorContext {
  cacheDir?: string;
  /** The tensor being built when the error came. */
  tensor?: string;
  file?: string;
  /** The build rebinds slices (--rebind): a SLICE_CONFLICT then gets no advice to pass it. */
  rebind?: boolean;
  /**
   * The model's tensor at a slice key, if any: a store SLICE_CONFLICT names its slice (a commit
   * batch fails every tensor it carried with the one error), and it is that slice's tensor the
   * message names, not whichever tensor of the batch surfaced the error first.
   */
  tensorOfSlice?: (shardName: string, offsetBytes: number, sizeBytes: number) => { name: string; file?: string } | undefined;
}

/**
 * Gives an error the context a user needs (which tensor, which file, which cache) without hiding
 * its type: typed errors that already name their tensor pass through; a full disk or an unwritable
 * cache becomes a BuilderError saying so; anything else is wrapped once with the tensor's name.
 */
export function wrapBuildError(error: unknown, context: BuildErrorContext): unknown {
  if (error instanceof BuilderError && (error.context.tensor !== undefined || context.tensor === undefined)) return error;
  if (error instanceof BuilderError && error.code === 'WORKER_FAILED') {
    // A worker that died during this tensor: its code stays (it was TENSOR_FAILED, the documented
    // WORKER_FAILED only its cause), the tensor is added.
    return new BuilderError('WORKER_FAILED', `${error.message} (tensor ${context.tensor})`, { ...error.context, tensor: context.tensor, file: error.context.file ?? context.file }, { cause: error });
  }
  // The builder's other errors say what they are about themselves (INTERRUPTED must stay itself:
  // the CLI's exit code 130 hangs on it), whichever tensor was in flight.
  if (error instanceof BuilderError) return error;
  const ownCode = (error as { code?: unknown } | null)?.code;
  if (typeof ownCode === 'string' && CACHE_WIDE_CODES.has(ownCode)) return error;
  // An s3:// model's shard replaced or deleted while read (its If-Match GET failed).
  const objectChanged = describeModelObjectChanged(error, { file: context.file, tensor: context.tensor });
  if (objectChanged !== undefined) return objectChanged;
  const where = context.tensor !== undefined ? ` (tensor ${context.tensor})` : '';
  const code = systemErrorCode(error);
  const path = (error as { path?: unknown }).path;
  const inCache = context.cacheDir !== undefined && isCacheFailure(error, context.cacheDir);
  if (code && NO_SPACE_CODES.has(code)) {
    return new BuilderError(
      'NO_SPACE',
      `${describeSystemCode(code)} while writing the cache ${context.cacheDir ?? ''}${where}; entries committed so far stay valid`,
      { file: context.cacheDir, tensor: context.tensor },
      { cause: error },
    );
  }
  if (
    (inCache && isStoreNotWritable(error)) ||
    (code && inCache && (context.tensor === undefined ? NOT_WRITABLE_CODES.has(code) : CACHE_NOT_WRITABLE_CODES.has(code) && isWriteFailure(error)))
  ) {
    return new BuilderError(
      'NOT_WRITABLE',
      `cannot write the cache directory ${context.cacheDir}: ${describeWriteCause(error)}`,
      { file: context.cacheDir, ...(context.tensor === undefined ? {} : { tensor: context.tensor }) },
      { cause: error },
    );
  }
  if (error instanceof SafetensorsError && error.code === 'SHARD_CHANGED') {
    // The reader's advice ("open the model again") is for a program; a build is rerun. What it
    // committed before stays valid, and the rerun skips it.
    const file = error.file ?? context.file;
    return new BuilderError(
      'MODEL_CHANGED',
      `MODEL_CHANGED: ${file ?? 'a shard file'} was rewritten (its size, modification time or header changed) while the build read it${where}; ` +
        'entries committed so far stay valid: run the build again once the model is no longer being written',
      { file, tensor: context.tensor ?? error.tensor },
      { cause: error },
    );
  }
  if ((error as { code?: unknown }).code === 'SLICE_CONFLICT' && context.tensor !== undefined) {
    const slice = (error as { details?: { slice?: unknown } }).details?.slice;
    const named =
      Array.isArray(slice) && typeof slice[0] === 'string' && typeof slice[1] === 'number' && typeof slice[2] === 'number'
        ? context.tensorOfSlice?.(slice[0], slice[1], slice[2])
        : undefined;
    const s3 = context.cacheDir !== undefined && isS3Url(context.cacheDir);
    return sliceConflictError(named?.name ?? context.tensor, named ? named.file : context.file, error, { rebind: context.rebind === true, s3 });
  }
  if (context.tensor === undefined) return error;
  const message = error instanceof Error ? error.message : String(error);
  if ((error as { name?: unknown } | null)?.name === 'RangeError' && OUT_OF_MEMORY_MESSAGE.test(message)) {
    // V8's and WebAssembly's refusals (a ulimit -v, a container): the process's limit, not the
    // tensor's fault, though it is the tensor the build was on.
    return new BuilderError(
      'OUT_OF_MEMORY',
      `memory could not be reserved while building tensor ${context.tensor}: ${message}; allow the process more memory (ulimit -v, the container) or run fewer workers (--jobs, buildCache's jobs)`,
      { tensor: context.tensor, file: context.file },
      { cause: error },
    );
  }
  const own = error as { tensor?: unknown; context?: { tensor?: unknown } };
  if (typeof own.tensor === 'string' || typeof own.context?.tensor === 'string') return error;
  const typed = (error as { code?: unknown }).code;
  return new BuilderError(
    'TENSOR_FAILED',
    `${typeof typed === 'string' && !message.includes(typed) ? `${typed}: ` : ''}${message}`,
    { tensor: context.tensor, file: typeof path === 'string' ? path : context.file },
    { cause: error },
  );
}

/**
 * A cache command's write that met a read-only or forbidden cache directory (gc's lock file, say):
 * NOT_WRITABLE, as build says it; anything else as it is.
 */
export function wrapCacheWriteError(error: unknown, cacheDir: string): unknown {
  if (error instanceof BuilderError) return error;
  // An s3:// cache's errors (a connect EACCES under S3_UNAVAILABLE) and the lock's timeout say what they are.
  if (isS3Url(cacheDir)) return error;
  const ownCode = (error as { code?: unknown } | null)?.code;
  if (typeof ownCode === 'string' && CACHE_WIDE_CODES.has(ownCode)) return error;
  const code = systemErrorCode(error);
  const refused = isStoreNotWritable(error) || (code !== undefined && CACHE_NOT_WRITABLE_CODES.has(code) && isWriteFailure(error));
  if (!refused || !isCacheFailure(error, cacheDir)) return error;
  return new BuilderError('NOT_WRITABLE', `cannot write the cache directory ${cacheDir}: ${describeWriteCause(error)}`, { file: cacheDir }, { cause: error });
}

/** The store's own NOT_WRITABLE (a write its directory cache refused, since 2026-12-07): a write failure whatever its errno. */
function isStoreNotWritable(error: unknown): error is StoreError {
  return isStoreError(error, 'NOT_WRITABLE');
}

/**
 * The cause after "cannot write the cache directory X: ": a store NOT_WRITABLE by its reason and
 * path, without its code (the wrapper's says it; it was said twice) or the "(file …)" the line's
 * describeError would otherwise repeat; any other error's message whole (an IO_ERROR keeps its code).
 */
function describeWriteCause(error: unknown): string {
  if (isStoreNotWritable(error)) return error.path === undefined ? error.reason : `${error.reason} (${error.path})`;
  return (error as Error).message;
}

/** The system calls that change a directory or a file: their EACCES or EPERM is a cache that cannot be written. */
const WRITE_SYSCALLS = new Set(['mkdir', 'rename', 'unlink', 'rmdir', 'link', 'symlink', 'write', 'copyfile', 'ftruncate', 'fsync', 'utime', 'chmod']);

/**
 * Whether the system error under `error` (its cause chain) came from a write: EROFS always; EACCES
 * or EPERM of a call that writes, or of an `open` of a file only writers open (the writer lock, a
 * temp file). A read refused (another user's manifest of mode 0600) is no NOT_WRITABLE: it stays
 * the store's IO_ERROR, as verify and inspect say it.
 */
function isWriteFailure(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const { code, syscall, path } = e as { code?: unknown; syscall?: unknown; path?: unknown };
    if (code === 'EROFS') return true;
    if (typeof syscall !== 'string') continue;
    if (WRITE_SYSCALLS.has(syscall)) return true;
    if (syscall === 'open' && typeof path === 'string') {
      const name = basename(path);
      return name.startsWith('lock') || name.includes('.tmp');
    }
    return false;
  }
  // No system call named: the store's own reading of the errno (EROFS found above) cannot tell.
  return false;
}

/**
 * Whether a failure is the cache directory's: its path (a Node error's `path`, a typed error's
 * `file` or `context.path`) lies inside `cacheDir`, compared as absolute paths. Without a path, any
 * error but the model reader's counts as the cache's (the store's own failures name no file).
 */
function isCacheFailure(error: unknown, cacheDir: string): boolean {
  if (error instanceof SafetensorsError) return false;
  const e = error as { path?: unknown; file?: unknown; context?: { path?: unknown } } | null;
  const path = [e?.path, e?.file, e?.context?.path].find((p): p is string => typeof p === 'string' && p.length > 0);
  if (path === undefined) return true;
  // The store names files under the directory it opened, symlinks resolved (openCacheStore pins it).
  return [resolve(cacheDir), realpathOrSelf(resolve(cacheDir))].some((dir) => {
    const inside = relative(dir, resolve(path));
    return inside === '' || (!inside.startsWith('..') && !isAbsolute(inside));
  });
}

function realpathOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * A tensor's slice key is bound to another entry in the way of this file's binding: say why that
 * happens and what to do. A directory cache binds a slice once per file (0.56), so another file's
 * binding of the shard name (another revision, a fine-tune) is never in the way there: what is, is
 * this very file's binding from before it changed in place (its inode), or one without a file stamp
 * (an older release's build). An s3:// cache (`s3`) binds a slice to one entry: another model with
 * the same shard names conflicts there as before. With the store's error as `cause`, its message
 * (which keys, which epoch) follows. With `rebind` the build moves slices already, so the conflict
 * came from another writer binding the slice at the same time: no advice to pass --rebind then.
 */
/**
 * The binding in the way of a SLICE_CONFLICT as the build judged it (judgeSliceBindings): its
 * entry, the stamps recorded with it, and this file's stamp now (null where the shard has none).
 */
export interface ConflictingBinding {
  key: string;
  stamps: readonly string[];
  stamp: string | null;
}

/**
 * What a binding in the way records of its file, for the message: a file stamp of this file's inode
 * number (this file before it changed in place, or another file system's file of that number: a
 * stamp records no device), an object's stamp (an s3:// model's shard), another local file's stamp
 * (another inode's, seen from an s3:// model's shard), or no stamp at all.
 */
export function describeConflictingBinding(binding: ConflictingBinding): { kind: 'same-inode' | 'object-stamp' | 'other-file' | 'no-file-stamp'; text: string } {
  const inode = binding.stamp === null ? undefined : parseFileStamp(binding.stamp)?.inode;
  if (inode !== undefined && binding.stamps.some((stamp) => parseFileStamp(stamp)?.inode === inode)) {
    return {
      kind: 'same-inode',
      text:
        `recorded with a file stamp of this file's inode number (${inode}): this very file before it changed in place, ` +
        'or another file with the same inode number on another file system (a file stamp records no device)',
    };
  }
  if (binding.stamps.some((stamp) => shardStampKind(stamp) === 'object')) {
    return { kind: 'object-stamp', text: "recorded with an object's stamp (an s3:// model's shard checked against it) that this shard's stamp does not tell from its own (the same ETag, or this shard has no stamp); another object's or a local file's binding would go beside it" };
  }
  const fileInode = binding.stamps.map((stamp) => parseFileStamp(stamp)?.inode).find((other) => other !== undefined);
  if (fileInode !== undefined) {
    return { kind: 'other-file', text: `recorded with a local file's stamp (inode ${fileInode}): another file's binding, a local model's` };
  }
  return { kind: 'no-file-stamp', text: "recorded with no file stamp (an older release's build, or a model whose shards have no stamp)" };
}

/**
 * The SLICE_CONFLICT of a tensor, worded by what comes (a local file's stamp, an s3:// model's
 * object stamp) and by what the binding in the way records. `besideRefused`: a directory cache where
 * other files or objects bound the slice beside a binding with no stamp (judge-slice-bindings.ts
 * isBesideRefused; `binding` the stampless one): the store binds nothing beside that one, and its
 * rebind would move theirs, which the build never does.
 */
export function sliceConflictError(
  tensor: string,
  file: string | undefined,
  cause?: unknown,
  options: { rebind?: boolean; s3?: boolean; besideRefused?: boolean; binding?: ConflictingBinding } = {},
): BuilderError {
  const storeSays = cause instanceof Error && cause.message.length > 0 ? ` (${cause.message})` : '';
  const slice = `the slice key of tensor ${tensor} (its shard name, offset and size)`;
  const passRebind = 'pass --rebind, which moves the slice to this tensor, or removes the binding where the build serves the tensor raw';
  const judged = options.binding === undefined ? undefined : describeConflictingBinding(options.binding);
  const bound = `is already bound to another entry${judged === undefined ? '' : ` (${options.binding!.key})`}, of other bytes`;
  // An s3:// model's shard (an object stamp): the rules for a local file's binding do not hold for it.
  const objectComes = options.binding?.stamp != null && shardStampKind(options.binding.stamp) === 'object';
  // A refusal by a rule of the store's bindings (the store's details.reason) is no other writer's doing.
  const storeRule = isStoreError(cause, 'SLICE_CONFLICT') && typeof cause.details.reason === 'string' ? cause.details.reason : undefined;
  const message = options.rebind && storeRule !== undefined
    ? `SLICE_CONFLICT: ${slice} could not be rebound: the cache's bindings of the slice would break a rule of the store (${storeRule})${storeSays}. ` +
      'No other writer did this, and running the build again gives the same refusal: give this model a cache of its own, or report it with the cache\'s verify output'
    : options.rebind
    ? `SLICE_CONFLICT: ${slice} was bound to another entry by another writer at the same time, although this build rebinds slices${storeSays}: ` +
      'another build into this cache shares the shard names; run the build again once it has finished'
    : options.besideRefused
      ? `SLICE_CONFLICT: ${slice}${objectComes ? " (an s3:// model's shard, stamped by its ETag)" : ''} ${bound}, ${judged!.text}${storeSays}: ` +
        'a binding with no stamp stands beside none (a directory cache binds a slice beside other files\' and objects\' bindings only where each records ' +
        "its file's stamp or its object's ETag), and other files' or objects' bindings of the slice (other revisions) are there too, which a build never " +
        'moves, --rebind included (it would move them with the stampless one). Give this model a cache of its own, or build the model of the ' +
        "stampless binding again with this release (it then records its file's stamp) before this one"
      : options.s3 && objectComes
        ? `SLICE_CONFLICT: ${slice} (an s3:// model's shard, stamped by its ETag) ${bound}, recorded with no object stamp: an s3:// cache binds ` +
          "an s3:// model's revisions side by side, told apart by their objects' ETags, but none beside a binding without one (a local " +
          `model's build: an s3:// cache records no file stamps; an older release's)${storeSays}. That model still in use: give one of them a cache ` +
          `of its own, or build it from an s3:// copy too (with --rebind, then this one); that binding a stale one of this model's: ${passRebind}`
        : options.s3
          ? `SLICE_CONFLICT: ${slice} is already bound to another entry, of other bytes: an s3:// cache binds a slice to one entry where a ` +
            "local model's files are concerned (it records no file stamps; an s3:// model's revisions, told apart by their objects' ETags, are bound side by side), and it holds " +
            "another model with the same shard names and layout (another revision, a fine-tune beside its base, a diffusers pipeline's " +
            `text_encoder/ and text_encoder_2/ model.safetensors), or this model's shard was replaced (rewritten, or a new revision downloaded)${storeSays}. ` +
            'Another model still in use: give it a cache of its own, build both into a directory cache, which binds each file apart, or build both from s3:// copies; ' +
            `a replaced shard: ${passRebind}`
          : `SLICE_CONFLICT: ${slice} ${bound}, ` +
            (judged === undefined
              ? "recorded with a file stamp of this file's inode number (this very file before it changed in place, or another file with the same " +
                "inode number on another file system), with an object's stamp, or with no file stamp (an older release's build)"
              : judged.text) +
            `${storeSays}: ${passRebind}` +
            (judged?.kind === 'same-inode' ? " (a binding of another file system's file moved: that file's loads hash the tensor again, and its next build binds it)" : '') +
            (objectComes
              ? ". Other files and objects of this shard name (other revisions, a local copy) are no conflict: a directory cache binds an s3:// model's shard beside their bindings, and leaves those as they are"
              : ". Other files of this shard name (other revisions, fine-tunes) are no conflict: a directory cache binds each file's tensors beside the others'");
  const details =
    options.binding === undefined
      ? {}
      : { boundKey: options.binding.key, boundStamps: [...options.binding.stamps], stamp: options.binding.stamp, boundBinding: judged!.kind };
  return new BuilderError('SLICE_CONFLICT', message, { tensor, file, ...details }, cause === undefined ? undefined : { cause });
}
