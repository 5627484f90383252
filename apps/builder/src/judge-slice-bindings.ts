// How a build judges the bindings of one slice for the file it reads (one binding per file,
// packages/store/FILE-BINDINGS.md). A directory cache binds a slice once per file: another file's
// binding of the shard name (another revision, a fine-tune, a pipeline's other component) stands
// beside this file's and is no longer in the way. What still is: this very file's binding to other
// bytes (the file changed in place: its inode), and a binding that says nothing of its file (no
// file stamp: an older release's build; every binding of an s3:// cache). Since 2026-12-08 an
// s3:// model's object stamps (ETags) are a file's identity here too (FILE-BINDINGS.md phase 3): for
// an s3:// model's shard every other file's or object's binding is another's, bound beside.
import { parseFileStamp } from '@splitzip/safetensors';
import { shardStampKind, type CacheStore, type SliceBinding } from '@splitzip/store';

export interface JudgedSliceBindings {
  /** The binding to the tensor's own entry, if any. */
  own: SliceBinding | undefined;
  /** Bindings to other entries that this file's build must move or refuse (SLICE_CONFLICT). */
  inTheWay: SliceBinding[];
  /** Bindings to other entries recorded with other files of the shard name: left as they are. */
  otherFiles: SliceBinding[];
}

/**
 * The slice's bindings for the file whose stamp is `stamp` and whose tensor's entry is `key`.
 * `perFile`: 'file', the store binds per file by file stamps (a directory cache); 'object', by object
 * stamps (an s3:// cache, an s3:// model: FILE-BINDINGS.md phase 2); false (an s3:// cache, a local
 * model) every binding to another entry is in the way, as before 0.56.
 */
export function judgeSliceBindings(
  store: CacheStore,
  slice: { shardName: string; offsetBytes: number; sizeBytes: number },
  key: string,
  stamp: string | null,
  perFile: 'file' | 'object' | false,
): JudgedSliceBindings {
  const judged: JudgedSliceBindings = { own: undefined, inTheWay: [], otherFiles: [] };
  const isOther = perFile === 'file' ? isOtherRevisionsBinding : perFile === 'object' ? isOtherObjectsBinding : () => false;
  for (const binding of store.lookupSliceBindings(slice.shardName, slice.offsetBytes, slice.sizeBytes)) {
    if (binding.entry.key === key) judged.own = binding;
    else if (isOther(binding.stamps, stamp)) judged.otherFiles.push(binding);
    else judged.inTheWay.push(binding);
  }
  return judged;
}

/**
 * A directory cache's judging (FILE-BINDINGS.md phase 3): a binding recorded with another file
 * (isOtherFilesBinding), another object (isOtherObjectsBinding), or of the other kind: an object's
 * binding (object stamps only) for a local file; for an object, any binding that records some
 * other file or object (file stamps, an inode or not: a local file's, never this object's). The
 * store binds beside each of those (each holds a stamp). Such bindings are never unbound nor moved
 * for this shard; where the store still refuses a binding beside them, the build does
 * (isBesideRefused), --rebind included. The file rule alone found no inode in an object stamp and
 * put those in the way, where a plain build unbound them (a local model's verify then failed).
 */
export function isOtherRevisionsBinding(recorded: readonly string[], current: string | null): boolean {
  if (current === null || recorded.includes(current)) return false;
  if (isOtherFilesBinding(recorded, current) || isOtherObjectsBinding(recorded, current)) return true;
  if (recorded.length === 0) return false;
  if (shardStampKind(current) === 'object') return true;
  return isObjectsBindingForFile(recorded, current);
}

/**
 * Whether a binding recorded against objects only (ETag stamps) is another's for a local file
 * stamped `current` (a file stamp with an inode): no object is a local file, so it is an s3://
 * revision's. Part of isOtherRevisionsBinding, and the rule an s3:// cache's judging adds to
 * isOtherFilesBinding (judge-model-bindings.ts): gc --model of a local model pruned those there.
 */
export function isObjectsBindingForFile(recorded: readonly string[], current: string | null): boolean {
  if (current === null || recorded.length === 0) return false;
  return parseFileStamp(current)?.inode !== undefined && recorded.every((stamp) => shardStampKind(stamp) === 'object');
}

/**
 * Whether the store would refuse this shard's binding beside the other files' and objects' (judged
 * otherFiles) and its --rebind would move some of them, so the build refuses (SLICE_CONFLICT) before
 * writing, --rebind included. Phase 3 binds a file's or an object's binding beside others (until
 * then an object's was refused here); what it still refuses is a binding with no stamp beside
 * others: a stampless shard's (judged no binding another's, so never here) or a stampless binding at
 * the slice, which makes the alias a rebind that moves every binding recording no other inode's
 * file stamp (packages/store slice-bindings.ts bindingsMovedBy): for an object's shard every one,
 * for a local file's the objects'. A consistent view never holds a stampless binding beside others
 * (the store refuses it, and reads one as damage), so this guards the others' bindings only.
 */
export function isBesideRefused(judged: JudgedSliceBindings, stamp: string | null): boolean {
  if (judged.own !== undefined || judged.otherFiles.length === 0) return false;
  if (stamp === null) return true;
  if (!judged.inTheWay.some((binding) => binding.stamps.length === 0)) return false;
  return shardStampKind(stamp) === 'object' || judged.otherFiles.some((binding) => binding.stamps.every((s) => shardStampKind(s) === 'object'));
}

/**
 * Whether a binding was recorded with other objects than the one stamped `current` (an object
 * stamp, `etag:"…"`): it holds an object stamp, and not `current`. An ETag names one object's bytes,
 * so another ETag is another revision of the shard name. Unknown (no object stamp coming, or none
 * recorded: a local model's binding) is not: the store refuses a binding beside it.
 */
export function isOtherObjectsBinding(recorded: readonly string[], current: string | null): boolean {
  if (current === null || shardStampKind(current) !== 'object' || recorded.includes(current)) return false;
  return recorded.some((stamp) => shardStampKind(stamp) === 'object');
}

/**
 * Whether a binding was recorded with another file than the one stamped `current`: it holds a
 * file stamp of another inode, and not `current`. One such stamp is enough: a binding recorded with
 * that file and with this one before it changed in place is still that file's, and its loads use it.
 * A stamp of this inode number whose ctime is newer than this file's is another file's too (another
 * file system's file of the same number): a file's ctime never goes back.
 * Unknown (no inode in `current`, or none among the stamps: legacy, object or no stamps) is not.
 */
export function isOtherFilesBinding(recorded: readonly string[], current: string | null): boolean {
  if (current === null || recorded.includes(current)) return false;
  const fields = parseFileStamp(current);
  const inode = fields?.inode;
  if (inode === undefined) return false;
  const ctimeNs = fields!.ctimeNs === undefined ? undefined : BigInt(fields!.ctimeNs);
  return recorded.some((stamp) => {
    const other = parseFileStamp(stamp);
    if (other?.inode === undefined) return false;
    if (other.inode !== inode) return true;
    // The same inode number with a change time after this file's own: not this file's past (its
    // ctime only grows), so another file of that number (another file system: no device recorded).
    return ctimeNs !== undefined && other.ctimeNs !== undefined && BigInt(other.ctimeNs) > ctimeNs;
  });
}
