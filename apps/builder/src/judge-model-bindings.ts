// Which of a cache's slice bindings a model left behind (`splitzip gc --model`, `inspect --model`).
// The cache records a binding's shard name, offset, size and the stamps of the files it was
// checked against, not where the model is: given the model, each binding of one of its shard names
// is judged against the file as it is now, from its header and stamp alone (no tensor is read).
// A slice may hold a binding per file (FILE-BINDINGS.md): each is judged on its own stamps, and one
// recorded with another file (a file stamp of another inode: the build's rule, isOtherFilesBinding)
// is another revision's or model's, kept (`other-file`), unless --prune-other-files says otherwise.
import type { SafetensorsModel, TensorInfo } from '@splitzip/safetensors';
import { classifyBinding, isS3Url, shardStampKind, type CacheEntry, type CacheStore } from '@splitzip/store';
import { createOtherRevisionFinder, type OtherRevisionFile } from './find-other-revision.js';
import { judgeRebindingAfterPrune } from './judge-rebinding-after-prune.js';
import { isObjectsBindingForFile, isOtherFilesBinding, isOtherRevisionsBinding } from './judge-slice-bindings.js';

/**
 * What a binding is to the model (each of a slice's bindings, on its own stamps):
 * - `live`: at a tensor's data span of its shard, recorded with the file as it is now (or the
 *   file has no stamp): loads serve it;
 * - `unchecked`: at a tensor's span, to an entry of that tensor's dtype and shape, with no record
 *   of the file as it is now (a copy, a touched or rewritten file, a cache built before stamps):
 *   only the bytes can tell, and a load checks them once (kept when they are the entry's);
 * - `leftover`: at no tensor's span of its shard now (a renamed shard's old name is `other-shard`;
 *   tensors moved within a shard, a re-shard that kept a name): no load of the model looks it up;
 * - `mismatched`: at a tensor's span, to an entry of another dtype or shape, with no record of the
 *   file as it is now (another tensor landed there): every load serves that tensor raw;
 * - `other-shard`: a shard name the model does not have (another model's, sharing the cache, or
 *   this model's before a rename or re-shard);
 * - `other-revision`: of a model in a Hugging Face hub snapshot, not live and recorded with other
 *   files of its shard name (isOtherFilesBinding), one of which is still in the repository's blobs/ (same inode,
 *   size and mtime): another revision's, whose loads use it; kept (find-other-revision.ts). With
 *   those files gone from blobs/, it is `other-file` (a model outside the hub tree may hold them).
 * - `superseded`: at a tensor's span, not recorded with the file as it is now, where another binding
 *   of the slice is (a directory cache keeps a binding per file since 0.56: the file changed or was
 *   replaced, and its build bound the new bytes beside this one): no load looks it up;
 * - `other-file`: not live and recorded with another file of its
 *   shard name (a file stamp of another inode, as a build judges it: isOtherFilesBinding; one is
 *   enough, since a binding recorded with that file and with this one before it changed in place is
 *   still that file's, and its loads use it): another revision's or model's binding, which a
 *   directory cache keeps beside this file's (one binding per file, since 0.56), or this model's
 *   file before a save replaced it (the stamps hold no path: they cannot tell); kept, until
 *   MAX_SLICE_BINDINGS pushes it out, or `pruneOtherFiles` (the user's word that those files were
 *   this model's, replaced) judges it as the others. (Until 0.56 judged as the others.)
 */
export type BindingVerdict = 'live' | 'unchecked' | 'leftover' | 'mismatched' | 'other-shard' | 'other-revision' | 'other-file' | 'superseded';

/** A binding judged to go (or, in a dry run, that would). */
export interface PrunedBinding {
  shardName: string;
  offsetBytes: number;
  sizeBytes: number;
  /** The entry it binds (content key) and that entry's tensor name. */
  key: string;
  qualname: string;
  verdict: Exclude<BindingVerdict, 'live' | 'unchecked' | 'other-revision' | 'other-file'>;
  /**
   * It was recorded with another file than this model's shard of that name (a file stamp of another
   * inode: isOtherFilesBinding): another model's file of the same shard name sharing the cache
   * (`text_encoder/model.safetensors` and `text_encoder_2/model.safetensors`), or this model's
   * earlier file replaced by a new one (a download, a save by rename). The stamps cannot tell which:
   * they hold no path. Only with `pruneOtherFiles` (in a hub snapshot, of files gone from its blobs/:
   * another revision's file still there is `other-revision`, kept); otherwise such bindings are kept
   * (`other-file`) since 0.56.
   */
  otherFile?: true;
  /**
   * With `otherFile`: it was recorded against s3:// objects only (ETag stamps: another revision of
   * the object, a directory cache since 2026-12-08), no local file: not a file a save replaced.
   */
  otherObject?: true;
}

export interface ModelBindingsReport {
  model: string;
  /** Nothing was changed (`gc --model --dry-run`, `inspect --model`). */
  dryRun: boolean;
  /** Bindings of shard names the model does not have go too. */
  pruneOtherShards: boolean;
  /**
   * `--prune-other-files`: bindings of the model's shard names recorded with other files (what
   * `otherFileKept` counts without it) are judged as this file's: the user's word that those files
   * were this model's, replaced by its files now (a download, a save by rename). Those judged to go
   * are in `prune` with `otherFile`, counted in `otherFiles`. In a hub snapshot, another revision's
   * file still in blobs/ stays `other-revision`, kept. Since 0.56.
   */
  pruneOtherFiles: boolean;
  /** The model's shard file names, whose bindings are judged against the files. */
  shards: string[];
  /** Bindings of the model's shard names, by verdict. */
  live: number;
  unchecked: number;
  leftover: number;
  mismatched: number;
  /**
   * `superseded`: bindings at a tensor's span not recorded with the file as it is now, where the
   * slice holds another binding that is (one binding per file, since 0.56: this file's bytes
   * changed, or it was replaced, and its build bound the new bytes beside): no load looks them up.
   */
  superseded: number;
  /**
   * Of a model in a hub snapshot: bindings of its shard names recorded only with another revision's
   * file still in the repository's blobs/ (the `other-revision` verdict), kept; per shard name and
   * blob below. 0 for a plain model directory.
   */
  otherRevision: number;
  /**
   * The `other-revision` bindings per shard name and blob, with the snapshots (`<rev>` names) whose
   * file of that name links the blob; `atTensorSpans` of them are at a tensor's span of this model,
   * to an entry of its shape (served to this revision too where its tensor is the same: a load
   * checks the bytes), the others at spans or of shapes this model's tensors do not have.
   */
  otherRevisions: (OtherRevisionFile & {
    shardName: string;
    bindings: number;
    atTensorSpans: number;
  })[];
  /**
   * Of a model in a hub snapshot whose repository's blobs/ could not be listed (its error's code):
   * the bindings recorded only with other files of its shard names, kept unjudged (another revision's
   * file may still be in blobs/). Absent where blobs/ was listed or not needed.
   */
  blobsUnlisted?: { repo: string; code: string; bindings: number };
  /**
   * Bindings of the model's shard names recorded with other files of that name (the `other-file`
   * verdict: another revision's or model's, bound beside this file's; in a hub snapshot, of files
   * gone from its blobs/, which a model outside the hub tree may hold), kept.
   * Since 0.56; those were judged (and removed, `otherFile`) as the others before, and are again
   * with `pruneOtherFiles` (0 then).
   */
  otherFileKept: number;
  /**
   * Of `otherFileKept`, those recorded against s3:// objects only (ETag stamps: other revisions of
   * an s3:// model of these shard names, a directory cache since 2026-12-08), no local file.
   */
  otherObjectKept: number;
  /** Bindings of shard names the model does not have, per name (sorted): kept unless pruneOtherShards. */
  otherShards: { shardName: string; bindings: number }[];
  /** The bindings that go (leftover, mismatched, and other-shard with pruneOtherShards); in a dry run, that would. */
  prune: PrunedBinding[];
  /**
   * Of `prune`, those recorded with other files of that shard name than this model's
   * (PrunedBinding.otherFile): only with `pruneOtherFiles` since 0.56 (else such bindings are
   * `otherFileKept`).
   */
  otherFiles: number;
  /**
   * Only where `otherFiles` > 0: of them, those whose slice keeps another binding once the prune ran
   * (a dry run: would). The model whose bindings they were binds those again only beside it, which
   * its load does only while `secondBindingHeld`; the others' slices are left unbound, which its
   * next load binds by content key (judge-rebinding-after-prune.ts).
   */
  otherFilesBeside?: number;
  /**
   * Only where `otherFiles` > 0: whether the cache holds a second binding of some slice once the
   * prune ran (the store's holdsSeveralBindings after it; a dry run: as judged). Without one, a load
   * binds no file beside another's (it never moves a cache to manifest format 3): those
   * `otherFilesBeside` stay `stale` for their model until its build.
   */
  secondBindingHeld?: boolean;
  /**
   * How many the store removed: 0 in a dry run; fewer than `prune` lists where a writer bound one
   * of those slices again, or to another entry, since it was judged (left as it is).
   */
  removed: number;
}

const sameShape = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((value, i) => value === b[i]);

/** The runtime's rule (entryDescribesTensor): only an entry of the tensor's dtype, size and shape can hold its bytes. */
function entryDescribes(entry: CacheEntry, tensor: TensorInfo): boolean {
  return entry.dtype === 'BF16' && tensor.dtype === 'BF16' && entry.rawBytes === tensor.slice.sizeBytes && sameShape(entry.shape, tensor.shape);
}

/**
 * Judges every binding of `store` against `model` (opened by the caller from `modelPath`): nothing is
 * read but the model's headers and stamps, and nothing changed (`dryRun: true`, `removed: 0`).
 */
export function judgeModelBindings(
  store: CacheStore,
  model: SafetensorsModel,
  modelPath: string,
  options: { pruneOtherShards: boolean; pruneOtherFiles?: boolean },
): ModelBindingsReport {
  const pruneOtherFiles = options.pruneOtherFiles === true;
  const stamps = new Map(model.shards.map((shard) => [shard.name, shard.stamp]));
  /** Tensors by shard name and `offset:size` of their data (several only for empty tensors). */
  const spans = new Map<string, Map<string, TensorInfo[]>>();
  for (const tensor of model.tensors) {
    const { shardName, offsetBytes, sizeBytes } = tensor.slice;
    let byShard = spans.get(shardName);
    if (!byShard) spans.set(shardName, (byShard = new Map()));
    const id = `${offsetBytes}:${sizeBytes}`;
    byShard.set(id, [...(byShard.get(id) ?? []), tensor]);
  }
  const report: ModelBindingsReport = {
    model: modelPath,
    dryRun: true,
    pruneOtherShards: options.pruneOtherShards,
    pruneOtherFiles,
    shards: model.shards.map((shard) => shard.name),
    live: 0,
    unchecked: 0,
    leftover: 0,
    mismatched: 0,
    superseded: 0,
    otherRevision: 0,
    otherRevisions: [],
    otherFileKept: 0,
    otherObjectKept: 0,
    otherShards: [],
    prune: [],
    otherFiles: 0,
    removed: 0,
  };
  const others = new Map<string, number>();
  // A directory cache binds an object's (ETag) revision beside a file's or another object's (the
  // build's rule: isOtherRevisionsBinding, FILE-BINDINGS.md phase 3); judged so, gc --model of one
  // s3:// revision pruned the others' bindings as `superseded`. An s3:// cache: other files' as
  // before, and for a local model (a file stamp) a binding of objects only is an s3:// revision's
  // too (as in a directory cache): gc --model of a local copy pruned those as its own.
  const isOtherBinding = isS3Url(store.root) ? isOtherFilesOrObjectsBinding : isOtherRevisionsBinding;
  // Only for a model in a hub snapshot (undefined otherwise): blobs/ is scanned at the first question.
  const finder = createOtherRevisionFinder(model.shards);
  const revisions = new Map<string, ModelBindingsReport['otherRevisions'][number]>();
  /**
   * Whether the binding (its own stamps, `recorded`) is another file's, kept (counted so): recorded
   * with another file of its shard name (the build's rule: a file stamp of another inode, one is
   * enough): in a hub snapshot, `other-revision` where one of those is still in blobs/; else, and
   * outside a hub snapshot, `other-file` unless --prune-other-files.
   */
  const isOtherFiles = (shardName: string, recorded: readonly string[], atTensorSpan: boolean): boolean => {
    const current = stamps.get(shardName) ?? null;
    if (!isOtherBinding(recorded, current)) return false;
    if (finder === undefined) {
      // The user's word: those files were this model's, replaced (judged as this file's).
      if (pruneOtherFiles) return false;
      // A plain directory: another revision's or model's binding beside this file's (one per file).
      report.otherFileKept += 1;
      if (isObjectsOnly(recorded)) report.otherObjectKept += 1;
      return true;
    }
    // Only the other files' stamps: this file's own blob is in blobs/ too.
    const found = finder.find(
      shardName,
      recorded.filter((stamp) => isOtherFilesBinding([stamp], current)),
    );
    const unlisted = finder.unlisted();
    if (unlisted !== undefined) {
      // Nothing tells whether another revision's file is still in blobs/: kept, as its may be.
      report.blobsUnlisted ??= { ...unlisted, bindings: 0 };
      report.blobsUnlisted.bindings += 1;
      return true;
    }
    if (found === undefined) {
      // Gone from blobs/: a deleted revision's file, or a model outside the hub tree of this shard
      // name (its stamps are in no blobs/; a probe's gc of a snapshot removed 18 bindings two such
      // models loaded): kept unless --prune-other-files, as in a plain directory.
      if (pruneOtherFiles) return false;
      report.otherFileKept += 1;
      if (isObjectsOnly(recorded)) report.otherObjectKept += 1;
      return true;
    }
    report.otherRevision += 1;
    const id = `${shardName}\n${found.blob}`;
    const group = revisions.get(id) ?? { shardName, ...found, bindings: 0, atTensorSpans: 0 };
    group.bindings += 1;
    if (atTensorSpan) group.atTensorSpans += 1;
    revisions.set(id, group);
    return true;
  };
  for (const entry of store.entries()) {
    for (const [shardName, offsetBytes, sizeBytes, sliceStamps] of entry.sliceKeys) {
      // This entry's binding of the slice, with its own stamps (an S3 cache adds this host's from the
      // store: lookupSliceBindings); a slice's other bindings are other files' (FILE-BINDINGS.md).
      const binding = stamps.has(shardName) ? store.lookupSliceBindings(shardName, offsetBytes, sizeBytes).find((b) => b.entry.key === entry.key) : undefined;
      const recorded = binding?.stamps ?? sliceStamps ?? [];
      const prune = (verdict: PrunedBinding['verdict']): void => {
        const fromOther = verdict !== 'other-shard' && isOtherBinding(recorded, stamps.get(shardName) ?? null);
        if (fromOther) report.otherFiles += 1;
        const fromObject = fromOther && isObjectsOnly(recorded);
        report.prune.push({ shardName, offsetBytes, sizeBytes, key: entry.key, qualname: entry.qualname, verdict, ...(fromOther ? { otherFile: true as const } : {}), ...(fromObject ? { otherObject: true as const } : {}) });
      };
      if (!stamps.has(shardName)) {
        others.set(shardName, (others.get(shardName) ?? 0) + 1);
        if (options.pruneOtherShards) prune('other-shard');
        continue;
      }
      const tensors = spans.get(shardName)?.get(`${offsetBytes}:${sizeBytes}`);
      if (tensors === undefined) {
        if (isOtherFiles(shardName, recorded, false)) continue;
        report.leftover += 1;
        prune('leftover');
        continue;
      }
      // With the stamps an S3 cache keeps on this host too (lookupSliceBindings), as a load judges it.
      const fileStamp = stamps.get(shardName) ?? null;
      if (binding === undefined || classifyBinding(binding, fileStamp) === 'trusted') {
        report.live += 1;
        continue;
      }
      const describes = tensors.some((tensor) => entryDescribes(entry, tensor));
      // Another binding of the slice recorded with the file as it is now: this file's loads look that one up, never this one.
      const hasOwn = store.lookupSliceBindings(shardName, offsetBytes, sizeBytes).some((other) => other.entry.key !== entry.key && classifyBinding(other, fileStamp) === 'trusted');
      if (finder !== undefined && isOtherFiles(shardName, recorded, describes)) {
        // Counted there: not `unchecked` (its loads' check finds another revision's bytes, unless the tensor is the same in both).
      } else if (finder === undefined && (hasOwn || !describes) && isOtherFiles(shardName, recorded, describes)) {
        // Another file's, beside this one's (or at a span where this file's tensor has another shape):
        // kept, before the superseded/mismatched checks, as a build leaves it (isOtherFilesBinding).
      } else if (hasOwn) {
        report.superseded += 1;
        prune('superseded');
      } else if (describes) {
        // Where this file has no binding of its own, a load looks this one up and checks its bytes (a copy of the file: kept).
        report.unchecked += 1;
      } else {
        report.mismatched += 1;
        prune('mismatched');
      }
    }
  }
  if (report.otherFiles > 0) Object.assign(report, judgeRebindingAfterPrune(store, report.prune));
  report.otherRevisions = [...revisions.values()];
  report.otherShards = [...others].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([shardName, bindings]) => ({ shardName, bindings }));
  return report;
}

/** An s3:// cache's judging: another file's binding (isOtherFilesBinding), or objects' only for a local file (isObjectsBindingForFile). */
function isOtherFilesOrObjectsBinding(recorded: readonly string[], current: string | null): boolean {
  return isOtherFilesBinding(recorded, current) || isObjectsBindingForFile(recorded, current);
}

/**
 * judgeModelBindings, then (unless `dryRun`) removes the bindings it judged to go, in one
 * unbindSlices call, each only while its slice is still bound to the entry judged: a binding a
 * writer made since (a load binding a moved tensor) stays.
 */
export async function pruneModelBindings(
  store: CacheStore,
  model: SafetensorsModel,
  modelPath: string,
  options: { dryRun: boolean; pruneOtherShards: boolean; pruneOtherFiles?: boolean },
): Promise<ModelBindingsReport> {
  const report = judgeModelBindings(store, model, modelPath, options);
  if (options.dryRun || report.prune.length === 0) return { ...report, dryRun: options.dryRun };
  const removed = await store.unbindSlices(report.prune.map(({ shardName, offsetBytes, sizeBytes, key }) => ({ shardName, offsetBytes, sizeBytes, key })));
  // What the store holds now (another writer may have bound or removed since), not the judgement.
  const held = report.otherFiles > 0 ? { secondBindingHeld: store.holdsSeveralBindings } : {};
  return { ...report, ...held, dryRun: false, removed };
}

/** Whether a binding was recorded against s3:// objects only (ETag stamps), no local file: its texts say an object revision's, not a replaced file's. */
function isObjectsOnly(recorded: readonly string[]): boolean {
  return recorded.length > 0 && recorded.every((stamp) => shardStampKind(stamp) === 'object');
}
