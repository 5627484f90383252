// Removing the entries no slice is bound to (CacheStore.dropUnboundEntries): the options' checks,
// the local store's plan (a state without those entries, which a compaction writes) and its report
// (the S3 store's steps: s3-drop-unbound-entries.ts).
import { optionNamesOf } from '@splitzip/codec/internal';
import type { StorageBackend } from './backend.js';
import { checkBooleanOption, checkOptionKeys, checkOptionsObject } from './check-options.js';
import { describeValue, detailValue } from './describe-value.js';
import { StoreError } from './errors.js';
import { StoreState } from './store-state.js';
import type { CacheEntry, DroppedEntry, DropUnboundEntriesOptions, DropUnboundEntriesReport } from './types.js';

const DROP_OPTIONS = optionNamesOf<DropUnboundEntriesOptions>({ dryRun: true, minAgeMs: true, exclusive: true });

/**
 * Checks dropUnboundEntries' options (INVALID_ARGUMENT, as for gc), for both stores: a local cache
 * ignores `minAgeMs` and `exclusive`, but a caller passing `'1h'` or `'yes'` means something, and is
 * told; `extra`: a store's own option names.
 */
export function checkDropUnboundOptions(options: unknown, extra: readonly string[] = []): asserts options is DropUnboundEntriesOptions {
  checkOptionsObject(options, 'dropUnboundEntries');
  checkOptionKeys(options, extra.length === 0 ? DROP_OPTIONS : [...DROP_OPTIONS, ...extra], 'dropUnboundEntries');
  const { dryRun, exclusive, minAgeMs } = options as DropUnboundEntriesOptions;
  checkBooleanOption(dryRun, 'dryRun', 'dropUnboundEntries');
  checkBooleanOption(exclusive, 'exclusive', 'dropUnboundEntries');
  if (minAgeMs !== undefined && (typeof minAgeMs !== 'number' || Number.isNaN(minAgeMs) || minAgeMs < 0)) {
    throw new StoreError('INVALID_ARGUMENT', `dropUnboundEntries: minAgeMs must be a non-negative number of milliseconds or undefined, got ${describeValue(minAgeMs)}`, {
      details: { option: 'minAgeMs', value: detailValue(minAgeMs) },
    });
  }
}

/**
 * Whether dropUnboundEntries removes `entry` (splitzip inspect counts them): no slice key at all,
 * and not an empty tensor's (no slice names one, since a zero-byte slice identifies no bytes: a
 * build stores it unbound, by content key, and would store it again after every drop).
 */
export function isDroppableEntry(entry: CacheEntry): boolean {
  return entry.sliceKeys.length === 0 && entry.rawBytes > 0;
}

/** The entries of `state` dropUnboundEntries removes (isDroppableEntry), in the state's order. */
export function findUnboundEntries(state: StoreState): CacheEntry[] {
  return Array.from(state.entries.values()).filter(isDroppableEntry);
}

/**
 * `state` without its unbound entries (every bound entry, and its bindings, as they are); undefined
 * when there is none. The state it returns is new; `state` is not changed (the caller swaps it in
 * once the manifest holding it is in place).
 */
export function planDropUnbound(state: StoreState): { state: StoreState; dropped: CacheEntry[] } | undefined {
  const dropped = findUnboundEntries(state);
  if (dropped.length === 0) return undefined;
  const kept = Array.from(state.entries.values()).filter((entry) => !isDroppableEntry(entry));
  return { state: StoreState.fromEntries(kept, { source: 'dropUnboundEntries' }, state.bindingLevel), dropped };
}

/** The report of a drop of `dropped` (`blobsLeft`: blob files that could not be removed). */
export function reportDrop(dropped: readonly CacheEntry[], dryRun: boolean, blobsLeft: string[] = []): DropUnboundEntriesReport {
  const entries: DroppedEntry[] = dropped.map(({ key, qualname, compBytes }) => ({ key, qualname, compBytes }));
  return { dryRun, count: entries.length, entries, reclaimedBytes: entries.reduce((sum, entry) => sum + entry.compBytes, 0), blobsLeft };
}

/** The second name recoverDamagedManifest gives the damaged manifest (`manifest.json.damaged-<ms>`). */
const KEPT_DAMAGED_MANIFEST = /^manifest\.json\.damaged-\d+$/;

/**
 * MANIFEST_INVALID (`details.reason: 'damaged-copy-kept'`) while the cache's root holds a damaged
 * manifest's kept copy; undefined when it holds none. The recovery that kept it salvaged the
 * entries without their slice bindings, and only the model it ran for was bound again: every other
 * model's entries look unbound until its own build binds them, and a drop would remove them all.
 */
export async function checkNoKeptDamagedManifest(backend: StorageBackend): Promise<void> {
  const kept = (await backend.listFiles((name) => KEPT_DAMAGED_MANIFEST.test(name), { rootOnly: true })).filter((file) => file.dir === '');
  if (kept.length === 0) return;
  const names = kept.map((file) => file.name).sort();
  const path = backend.describe(names[0]!);
  throw new StoreError(
    'MANIFEST_INVALID',
    `dropUnboundEntries refuses while the cache holds a damaged manifest's kept copy (${names.join(', ')}): its recovery kept the entries without their slice bindings, so the entries of every model but the one repaired look unbound and would all be removed; ` +
      'each model sharing the cache binds its entries again with `splitzip build <model> --out <cache> --repair`; then move or remove the kept manifest.json.damaged-* copy (after inspecting it) and run it again',
    { path, details: { reason: 'damaged-copy-kept', keptCopies: names } },
  );
}
