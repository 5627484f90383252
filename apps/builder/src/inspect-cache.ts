// A summary of what a cache holds: per entry sizes, escape rate and slices; totals.
import { parseFileStamp } from '@splitzip/safetensors';
import { isDroppableEntry, isS3Url, type CacheStore } from '@splitzip/store';
import type { DropRefusal } from './find-drop-refusal.js';
import type { ModelBindingsReport } from './judge-model-bindings.js';

export interface InspectEntry {
  key: string;
  qualname: string;
  dtype: string;
  shape: number[];
  rawBytes: number;
  compBytes: number;
  ratio: number | null;
  elementCount: number;
  escapeCount: number;
  /** Escapes per value. */
  escapeRate: number | null;
  codebookSize: number;
  chunkSize: number;
  /** [shardName, offsetBytes, sizeBytes], every alias persisted so far. */
  slices: [string, number, number][];
}

export interface InspectReport {
  cache: string;
  entries: InspectEntry[];
  totals: {
    entries: number;
    slices: number;
    rawBytes: number;
    compBytes: number;
    ratio: number | null;
    elementCount: number;
    escapeCount: number;
    escapeRate: number | null;
    /**
     * Slices bound to more than one entry: a binding per file (FILE-BINDINGS.md: revisions or models
     * of the same shard names in one directory cache, each load served from its own); `slices`
     * counts each binding. Set by inspectCache (optional for reports made by hand); 0 on s3://.
     */
    slicesWithSeveralBindings?: number;
    /** Entries bound to no slice, found by content key only, which gc --drop-unbound-entries removes (isDroppableEntry: empty tensors' stay). */
    unboundEntries: number;
    /** Their payload bytes: what that drop reclaims. */
    unboundCompBytes: number;
    /**
     * Shard names whose bindings were recorded with more than one file (file stamps of other
     * inodes): another revision's or model's of the same shard names, or a shard replaced by a new
     * file (a save by rename: the stamps cannot tell it from another file). Unbound entries of the
     * tensors bound there (`sharedShardUnbound`) may then be that revision's tensors whose slices a
     * `build --rebind` moved: its loads read those raw (stale), its next build --rebind binds them
     * without encoding, and a drop makes that build encode them again. Set by inspectCache
     * (optional for reports made by hand).
     */
    sharedShardNames?: string[];
    /**
     * Of the unbound entries, those whose qualname and shape match an entry bound at one of
     * `sharedShardNames` (what a --rebind of another file of that name leaves behind: the tensor of
     * that name, other bytes), and the shard names where they match. Only these get the text's
     * caution: an unbound entry of no tensor bound there (a renamed tensor, another model's) is not
     * one another file of those names loads. Set by inspectCache (optional for reports made by hand).
     * Always `{ entries: 0, shardNames: [] }` for a directory cache since 0.56: it keeps a binding per
     * file, so no build of another file moves a slice away from one (that revision's build binds
     * them again beside, which the unbound line's advice to build each model first covers).
     */
    sharedShardUnbound?: { entries: number; shardNames: string[] };
    /**
     * `splitzip inspect` only (inspectCache asks the store nothing and leaves it out): the store's
     * refusal of gc --drop-unbound-entries now (findDropRefusal: a damaged manifest's kept copy, a
     * damaged journal, a store that cannot drop), null where it would run.
     */
    dropRefusal?: DropRefusal | null;
    /**
     * `splitzip inspect` only: false, kept for scripts. It was true on s3://, whose drop needed
     * --exclusive until 2026-12-07; the drop's intent objects make it safe beside writers now
     * (--exclusive accepted, no effect), and no advice names it.
     */
    dropNeedsExclusive?: boolean;
  };
  /** With `inspect --model`: the model's bindings judged as `gc --model` would (judgeModelBindings), nothing changed. */
  bindings?: ModelBindingsReport;
}

export function inspectCache(store: CacheStore, cacheDir: string): InspectReport {
  const entries: InspectEntry[] = [];
  let unboundEntries = 0;
  let unboundCompBytes = 0;
  // The inodes each shard name's bindings were recorded with (file stamps: SafetensorsShard.stamp).
  const inodesByShard = new Map<string, Set<string>>();
  // Each slice's bindings (`shard\noffset\nsize` -> count), for those bound to several entries.
  const bindingsBySlice = new Map<string, number>();
  for (const entry of store.entries()) {
    for (const [shardName, offsetBytes, sizeBytes, stamps] of entry.sliceKeys) {
      const slice = `${shardName}\n${offsetBytes}\n${sizeBytes}`;
      bindingsBySlice.set(slice, (bindingsBySlice.get(slice) ?? 0) + 1);
      for (const stamp of stamps ?? []) {
        const inode = parseFileStamp(stamp)?.inode;
        if (inode === undefined) continue;
        const inodes = inodesByShard.get(shardName) ?? new Set<string>();
        inodes.add(inode);
        inodesByShard.set(shardName, inodes);
      }
    }
    if (isDroppableEntry(entry)) {
      unboundEntries++;
      unboundCompBytes += entry.compBytes;
    }
    const { elementCount, escapeCount, chunkSize } = entry.meta;
    entries.push({
      key: entry.key,
      qualname: entry.qualname,
      dtype: entry.dtype,
      shape: [...entry.shape],
      rawBytes: entry.rawBytes,
      compBytes: entry.compBytes,
      ratio: entry.rawBytes > 0 ? entry.compBytes / entry.rawBytes : null,
      elementCount,
      escapeCount,
      escapeRate: elementCount > 0 ? escapeCount / elementCount : null,
      codebookSize: entry.codebook.exponents.length,
      chunkSize,
      slices: entry.sliceKeys.map(([shard, offset, size]) => [shard, offset, size]),
    });
  }
  const sharedShardNames = [...inodesByShard].filter(([, inodes]) => inodes.size > 1).map(([shardName]) => shardName).sort();
  // A directory cache binds another file's slices beside (one binding per file): none is moved away.
  const sharedShardUnbound = isS3Url(cacheDir) ? findSharedShardUnbound(store, new Set(sharedShardNames)) : { entries: 0, shardNames: [] };
  let slicesWithSeveralBindings = 0;
  for (const count of bindingsBySlice.values()) if (count > 1) slicesWithSeveralBindings++;
  entries.sort((a, b) => a.qualname.localeCompare(b.qualname) || a.key.localeCompare(b.key));
  const sum = (pick: (e: InspectEntry) => number): number => entries.reduce((total, e) => total + pick(e), 0);
  const rawBytes = sum((e) => e.rawBytes);
  const compBytes = sum((e) => e.compBytes);
  const elementCount = sum((e) => e.elementCount);
  const escapeCount = sum((e) => e.escapeCount);
  return {
    cache: cacheDir,
    entries,
    totals: {
      entries: entries.length,
      slices: sum((e) => e.slices.length),
      slicesWithSeveralBindings,
      rawBytes,
      compBytes,
      ratio: rawBytes > 0 ? compBytes / rawBytes : null,
      elementCount,
      escapeCount,
      escapeRate: elementCount > 0 ? escapeCount / elementCount : null,
      unboundEntries,
      unboundCompBytes,
      sharedShardNames,
      sharedShardUnbound,
    },
  };
}

/**
 * The unbound entries whose qualname and shape match an entry bound at one of `shared` (shard names
 * whose bindings carry stamps of more than one file): a --rebind of one file of such a name moved
 * the slice of that very tensor to its own bytes, leaving the other file's entry unbound. Counted
 * instead of every unbound entry, which the caution took them all for (review of 7c7f822).
 */
function findSharedShardUnbound(store: CacheStore, shared: ReadonlySet<string>): { entries: number; shardNames: string[] } {
  if (shared.size === 0) return { entries: 0, shardNames: [] };
  const identity = (qualname: string, shape: readonly number[]): string => JSON.stringify([qualname, shape]);
  // Each bound tensor's identity at those shard names, with the names it is bound at.
  const boundAt = new Map<string, Set<string>>();
  for (const entry of store.entries()) {
    for (const [shardName] of entry.sliceKeys) {
      if (!shared.has(shardName)) continue;
      const id = identity(entry.qualname, entry.shape);
      const names = boundAt.get(id) ?? new Set<string>();
      names.add(shardName);
      boundAt.set(id, names);
    }
  }
  let entries = 0;
  const shardNames = new Set<string>();
  for (const entry of store.entries()) {
    if (!isDroppableEntry(entry)) continue;
    const names = boundAt.get(identity(entry.qualname, entry.shape));
    if (names === undefined) continue;
    entries++;
    for (const name of names) shardNames.add(name);
  }
  return { entries, shardNames: [...shardNames].sort() };
}
