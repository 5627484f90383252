// A summary of what a cache holds: per entry sizes, escape rate and slices; totals.
import { parseFileStamp } from '@splitzip/safetensors';
import { isDroppableEntry, type CacheStore } from '@splitzip/store';
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
    /** Entries bound to no slice, found by content key only, which gc --drop-unbound-entries removes (isDroppableEntry: empty tensors' stay). */
    unboundEntries: number;
    /** Their payload bytes: what that drop reclaims. */
    unboundCompBytes: number;
    /**
     * Shard names whose bindings were recorded with more than one file (file stamps of other
     * inodes): another revision's or model's of the same shard names, or a shard replaced by a new
     * file. Its unbound entries may then be that revision's tensors whose slices a `build --rebind`
     * moved: its loads read those raw (stale), its next build --rebind binds them without encoding,
     * and a drop makes that build encode them again. Set by inspectCache (optional for reports
     * made by hand).
     */
    sharedShardNames?: string[];
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
  for (const entry of store.entries()) {
    for (const [shardName, , , stamps] of entry.sliceKeys) {
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
      rawBytes,
      compBytes,
      ratio: rawBytes > 0 ? compBytes / rawBytes : null,
      elementCount,
      escapeCount,
      escapeRate: elementCount > 0 ? escapeCount / elementCount : null,
      unboundEntries,
      unboundCompBytes,
      sharedShardNames: [...inodesByShard].filter(([, inodes]) => inodes.size > 1).map(([shardName]) => shardName).sort(),
    },
  };
}
