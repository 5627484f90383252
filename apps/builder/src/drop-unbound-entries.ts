import type { CacheStore, DropUnboundEntriesReport } from '@splitzip/store';
import type { PrunedBinding } from './judge-model-bindings.js';

/**
 * `gc --drop-unbound-entries`: the store's dropUnboundEntries, after the `--model` prune. A dry run
 * removed no binding, so the store's own dry run would leave out the entries the prune would unbind
 * entirely; they are added here (each of whose bindings is in `prune`, to that very entry), so that
 * `--dry-run` says what the same command without it removes.
 */
export async function dropUnboundEntries(store: CacheStore, options: { dryRun: boolean; prune: readonly PrunedBinding[] }): Promise<DropUnboundEntriesReport> {
  const report = await store.dropUnboundEntries({ dryRun: options.dryRun });
  if (!options.dryRun || options.prune.length === 0) return report;
  const pruned = new Set(options.prune.map((b) => `${b.key}\0${b.shardName}\0${b.offsetBytes}\0${b.sizeBytes}`));
  const entries = [...report.entries];
  for (const entry of store.entries()) {
    if (entry.sliceKeys.length === 0) continue;
    if (!entry.sliceKeys.every(([shardName, offsetBytes, sizeBytes]) => pruned.has(`${entry.key}\0${shardName}\0${offsetBytes}\0${sizeBytes}`))) continue;
    entries.push({ key: entry.key, qualname: entry.qualname, compBytes: entry.compBytes });
  }
  return { ...report, count: entries.length, entries, reclaimedBytes: entries.reduce((sum, entry) => sum + entry.compBytes, 0) };
}
