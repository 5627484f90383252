import { isFromOtherFile } from '@splitzip/safetensors';

/** What mends a binding whose shard holds other bytes (a build of this model moves the slice to them); describeBuildRemedy says it for a read-only cache. */
export const STALE_REMEDY = 'a build of this model with --rebind binds it';

/** A binding recorded only with other files of its shard name (isFromOtherFile of @splitzip/safetensors: the builder's rule for build and verify --model too), as a stale tensor's detail names it. */
export const OTHER_FILE_BINDING = "bound from another file of this shard name (another model's or revision's, or a replaced shard)";

/**
 * What mends such a binding. A build with --rebind moves the slice of a tensor it caches, but keeps
 * one it skips (coverage, or no gain with --skip-no-gain) bound as it is, so that another model
 * sharing the shard name keeps its binding: only --rebind-other-files removes it (builder README).
 * Until 2026-12-07 the runtime named STALE_REMEDY here, which left a skipped tensor `stale`.
 */
export const OTHER_FILE_REMEDY =
  'a cache of its own for each model and revision keeps such bindings apart; in this one, a build of this model with --rebind binds it where that build caches the tensor, ' +
  'and one it skips (coverage, or no gain with --skip-no-gain) keeps that binding: `build --rebind --rebind-other-files` removes it (for a model whose shard names no other model in the cache shares)';

/** The remedy of a binding to other bytes than its shard holds: OTHER_FILE_REMEDY for one from other files, else STALE_REMEDY. */
export function staleBindingRemedy(recorded: readonly string[], current: string | null): string {
  return isFromOtherFile(recorded, current) ? OTHER_FILE_REMEDY : STALE_REMEDY;
}
