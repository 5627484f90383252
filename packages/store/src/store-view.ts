import { isSafetensorsDtype } from '@splitzip/safetensors';
import { computeContentKey, dtypeToTorchText, isBf16Dtype } from './compute-content-key.js';
import { StoreError } from './errors.js';
import { StoreState } from './store-state.js';
import type { AliasSliceItem, CacheEntry, SliceBinding } from './types.js';
import { describeValue, detailValue } from './describe-value.js';
import { MAX_SHARD_NAME_CHARS } from './limits.js';
import { isContentKey, validateSliceKey } from './validate-entry.js';

const NO_STAMPS: readonly string[] = Object.freeze([]);

/** validateSliceKey's rule without its allocations, for the common valid case (NUL in a name is left to it). */
function isPlainSliceKey(shardName: unknown, offsetBytes: unknown, sizeBytes: unknown): boolean {
  return (
    typeof shardName === 'string' &&
    shardName.length > 0 &&
    shardName.length <= MAX_SHARD_NAME_CHARS &&
    !shardName.includes('\0') &&
    Number.isSafeInteger(offsetBytes) &&
    (offsetBytes as number) >= 0 &&
    Number.isSafeInteger(sizeBytes) &&
    (sizeBytes as number) >= 0
  );
}

/** What both stores keep of their cache's defaults. */
interface StoreDefaults {
  chunkSize: number;
  coverageMin: number;
}

/**
 * The read side shared by the filesystem and the S3 store: both hold the same in-memory view
 * (entries + slice owners) and answer lookups from it; they differ only in how the view is
 * loaded and refreshed and in how writes reach storage.
 */
export abstract class StoreView<H extends StoreDefaults> {
  protected state = new StoreState();
  protected closed = false;

  protected constructor(protected header: H) {}

  abstract get root(): string;

  get size(): number {
    return this.state.entries.size;
  }

  /** CacheStore.holdsSeveralBindings: the slice index's count of slices with several bindings (an s3:// store's: in its format-2 view; cache.json can stay format 2 with none held, see S3CacheStore.layoutFormat). */
  get holdsSeveralBindings(): boolean {
    return this.state.holdsSecondBindings;
  }

  /** CacheStore.holdsObjectBindingsBeside: the slice index's count of slices holding an object's binding beside another. */
  get holdsObjectBindingsBeside(): boolean {
    return this.state.holdsObjectBindingsBeside;
  }

  get chunkSize(): number {
    return this.header.chunkSize;
  }

  get coverageMin(): number {
    return this.header.coverageMin;
  }

  protected assertOpen(): void {
    if (this.closed) throw new StoreError('STORE_CLOSED', 'the cache store is closed', { path: this.root });
  }

  lookup(bytes: Uint8Array, shape: readonly number[], dtype: string): CacheEntry | undefined {
    this.assertOpen();
    if (!isBf16Dtype(dtype)) return missForOtherDtype(dtype);
    return this.state.entries.get(computeContentKey(bytes, shape, 'BF16'));
  }

  getEntry(key: string): CacheEntry | undefined {
    this.assertOpen();
    const entry = this.state.entries.get(key);
    // Checked on a miss only (a hit was a valid key): a number is a caller's bug, not a miss. A
    // string that is no content key is one (`getEntry('')` is how a caller asks "still open?").
    if (entry === undefined && typeof key !== 'string') throw new StoreError('INVALID_ARGUMENT', `getEntry: key must be a string, got ${describeValue(key)}`, { details: { key: detailValue(key) } });
    return entry;
  }

  lookupBySlice(shardName: string, offsetBytes: number, sizeBytes: number): CacheEntry | undefined {
    return this.lookupSliceBinding(shardName, offsetBytes, sizeBytes)?.entry;
  }

  /**
   * The slice's binding whose stamps hold `stamp` (the shard the reader holds), else its latest
   * (the reader checks the bytes: classifyBinding). A slice holds one binding per file at most
   * (FILE-BINDINGS.md); without `stamp`, the latest.
   */
  lookupSliceBinding(shardName: string, offsetBytes: number, sizeBytes: number, stamp?: string | null): SliceBinding | undefined {
    this.assertOpen();
    const owner = this.state.sliceOwners.getOwnerFor(shardName, offsetBytes, sizeBytes, stamp);
    const entry = owner === undefined ? undefined : this.state.entries.get(owner.key);
    if (entry === undefined || owner === undefined) {
      // Checked on a miss only, so a hit costs nothing more: a slice aliasSlices would refuse
      // (NaN, a negative or fractional offset, a shard name of no string) is INVALID_ARGUMENT as there.
      if (!isPlainSliceKey(shardName, offsetBytes, sizeBytes)) validateSliceKey([shardName, offsetBytes, sizeBytes], undefined, 'INVALID_ARGUMENT');
      return undefined;
    }
    return { entry, stamps: owner.stamps ?? NO_STAMPS };
  }

  /** Every binding of the slice, latest first (one per file; an `s3://` cache: zero or one). */
  lookupSliceBindings(shardName: string, offsetBytes: number, sizeBytes: number): SliceBinding[] {
    this.assertOpen();
    const owners = this.state.sliceOwners.getOwners(shardName, offsetBytes, sizeBytes);
    if (owners.length <= 1) {
      // lookupSliceBinding as the store has it (an s3:// cache adds this host's file stamps there).
      const binding = this.lookupSliceBinding(shardName, offsetBytes, sizeBytes);
      return binding === undefined ? [] : [binding];
    }
    const bindings: SliceBinding[] = [];
    for (const owner of owners) {
      const entry = this.state.entries.get(owner.key);
      if (entry !== undefined) bindings.push({ entry, stamps: owner.stamps ?? NO_STAMPS });
    }
    return bindings;
  }

  entries(): IterableIterator<CacheEntry> {
    this.assertOpen();
    return this.state.entries.values();
  }

  /** The entry a blob read or check names: ENTRY_NOT_FOUND when there is none. */
  protected entryToRead(key: string): CacheEntry {
    this.assertOpen();
    const entry = this.state.entries.get(key);
    if (!entry) throw new StoreError('ENTRY_NOT_FOUND', 'no entry with this key', { entry: key, path: this.root });
    return entry;
  }

  /** readBlob's argument checks: the entry, and the slot's first compBytes bytes to read into. */
  protected prepareBlobRead(key: string, stagingSlot: Uint8Array): { entry: CacheEntry; view: Uint8Array } {
    this.assertOpen();
    if (!(stagingSlot instanceof Uint8Array)) throw new StoreError('INVALID_ARGUMENT', 'stagingSlot must be a Uint8Array', { entry: key });
    const entry = this.entryToRead(key);
    if (stagingSlot.length < entry.compBytes) {
      throw new StoreError('SLOT_TOO_SMALL', `staging slot holds ${stagingSlot.length} bytes, the payload needs ${entry.compBytes}`, {
        entry: key,
        details: { slotBytes: stagingSlot.length, payloadBytes: entry.compBytes },
      });
    }
    return { entry, view: stagingSlot.subarray(0, entry.compBytes) };
  }
}

/**
 * The answer for a dtype other than BF16: a miss (never cached) for any safetensors dtype (the
 * sub-byte F4, F6_E2M3, F6_E3M2 included, which the content key's torch table leaves out: an MXFP4
 * model's loader looks each tensor up) or a `torch.*` text the content key knows (`torch.float32`),
 * else UNKNOWN_DTYPE. A misspelt BF16 (`bf16`, `bfloat16`) read as a plain miss before, so a
 * caller's cache never hit and nothing said why.
 */
function missForOtherDtype(dtype: unknown): undefined {
  if (!isSafetensorsDtype(dtype)) dtypeToTorchText(dtype as string);
  return undefined;
}

/** The content key an alias item names (undefined for non-BF16 bytes, which are never cached). */
export function resolveAliasKey(item: AliasSliceItem): string | undefined {
  if (typeof item.key === 'string') {
    if (!isContentKey(item.key)) throw new StoreError('INVALID_ARGUMENT', 'key must be 40 lower-case hex digits', { details: { key: item.key } });
    return item.key;
  }
  // A tensor reference is { bytes, shape, dtype }: raw bytes alone, or an object missing one of
  // them, named no tensor and answered false ("no such entry") before.
  const ref = item.key as { bytes?: unknown; shape?: unknown; dtype?: unknown } | null;
  if (ref && typeof ref === 'object' && !ArrayBuffer.isView(ref) && ArrayBuffer.isView(ref.bytes) && Array.isArray(ref.shape) && typeof ref.dtype === 'string') {
    return isBf16Dtype(ref.dtype) ? computeContentKey(ref.bytes as ArrayBufferView, ref.shape as number[], 'BF16') : missForOtherDtype(ref.dtype);
  }
  throw new StoreError('INVALID_ARGUMENT', 'alias key must be a content key or { bytes, shape, dtype }');
}
