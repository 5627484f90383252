import { isFromOtherFile } from '@splitzip/safetensors';

/** What mends a binding whose shard holds other bytes (a build of this model moves the slice to them); describeBuildRemedy says it for a read-only cache. */
export const STALE_REMEDY = 'a build of this model with --rebind binds it';

/** A binding recorded only with other files of its shard name (isFromOtherFile of @splitzip/safetensors: the builder's rule for build and verify --model too), as a stale tensor's detail names it. */
export const OTHER_FILE_BINDING = "bound from another file of this shard name (another model's or revision's, or a replaced shard)";

/**
 * What mends such a binding on s3:// (one binding per slice). A build with --rebind moves the slice
 * of a tensor it caches, and removes the other file's binding of one it skips (coverage, or no gain
 * with --skip-no-gain), since 736a928; --rebind-other-files has had no effect since (builder README).
 * Until 2026-12-07 the runtime named STALE_REMEDY here, which left a skipped tensor `stale`.
 */
export const OTHER_FILE_REMEDY =
  'a cache of its own for each model and revision keeps such bindings apart; in this one, a build of this model with --rebind binds it where that build caches the tensor, ' +
  'and removes that binding where it skips it (coverage, or no gain with --skip-no-gain), taking it from the other model';

/**
 * A local cache keeps one binding per file (FILE-BINDINGS.md): a build of this model binds the
 * tensors it caches beside other files' bindings, which stay for their own loads; one it skips
 * gets no binding, so while another file's binding holds its slice it stays stale.
 */
export const OTHER_FILE_BESIDE_REMEDY =
  "a build of this model binds this file's tensors beside the other files' bindings (one binding per file: revisions of a model share the cache; " +
  "a tensor that build skips, for its coverage or no gain, is not bound: it stays `stale`, read raw and hashed once per process, while another file's binding holds its slice, which a cache of its own for this model avoids)";

/**
 * The remedy of a binding to other bytes than its shard holds: for one from other files,
 * OTHER_FILE_BESIDE_REMEDY on a local cache (`remote` false), OTHER_FILE_REMEDY on s3:// (one
 * binding per slice); else STALE_REMEDY.
 */
export function staleBindingRemedy(recorded: readonly string[], current: string | null, remote = true): string {
  if (!isFromOtherFile(recorded, current)) return STALE_REMEDY;
  return remote ? OTHER_FILE_REMEDY : OTHER_FILE_BESIDE_REMEDY;
}
