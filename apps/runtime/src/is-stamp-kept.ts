import { isSliceStampKept, shardStampKind, type SliceBinding } from '@splitzip/store';

/** What findBindingStamps reads: a ShardCache or a CacheStore (lookupSliceBindings optional for a caller's wrapper). */
interface BindingLookup {
  lookupSliceBinding(shardName: string, offsetBytes: number, sizeBytes: number): SliceBinding | undefined;
  lookupSliceBindings?(shardName: string, offsetBytes: number, sizeBytes: number): SliceBinding[];
}

/**
 * The stamps of the slice's binding to `key` as this handle sees them; undefined where it has none.
 * lookupSliceBinding first: an s3:// cache's single binding shows this host's file stamps only there.
 */
export function findBindingStamps(lookup: BindingLookup, shardName: string, offsetBytes: number, sizeBytes: number, key: string): readonly string[] | undefined {
  const latest = lookup.lookupSliceBinding(shardName, offsetBytes, sizeBytes);
  if (latest?.entry.key === key) return latest.stamps;
  const all = typeof lookup.lookupSliceBindings === 'function' ? lookup.lookupSliceBindings(shardName, offsetBytes, sizeBytes) : [];
  return all.find((binding) => binding.entry.key === key)?.stamps;
}

/**
 * Whether recording `stamp` with a binding holding `stamps` keeps it (the store's isSliceStampKept:
 * past MAX_SLICE_STAMPS a file changed before the files whose stamps the binding keeps ranks last,
 * and aliasSlices answers `true` recording nothing). An s3:// cache keeps a file stamp for this host,
 * among this host's file stamps of the binding only, and an object stamp by the bucket's rule (the
 * newest: always). No binding (undefined): a new one, kept.
 */
export function isStampKept(remote: boolean, stamps: readonly string[] | undefined, stamp: string): boolean {
  if (stamps === undefined) return true;
  if (!remote) return isSliceStampKept(stamps, stamp);
  return shardStampKind(stamp) === 'object' || isSliceStampKept(stamps.filter((other) => shardStampKind(other) === 'file'), stamp);
}
