import { StoreError } from './errors.js';
import { MAX_ENTRIES, MAX_SLICE_KEYS_PER_ENTRY } from './limits.js';
import { mergeSliceStamps } from './merge-slice-stamps.js';
import type { CacheEntry, SliceKeyTuple } from './types.js';
import { sliceId, withSliceKeys } from './validate-entry.js';

/** One change to the cache, as journalled. */
export type StoreOp =
  | { kind: 'add'; key: string; entry: CacheEntry }
  | { kind: 'alias'; key: string; slice: SliceKeyTuple }
  | { kind: 'rebind'; key: string; slice: SliceKeyTuple }
  | { kind: 'seal'; nextGeneration: number };

export interface OpContext {
  /** Where the ops came from, for error messages (journal file, manifest, caller). */
  source: string;
  path?: string;
}

function sliceConflict(slice: SliceKeyTuple, boundKey: string, requestedKey: string, context: OpContext): StoreError {
  return new StoreError(
    'SLICE_CONFLICT',
    `slice ${JSON.stringify(slice)} is bound to ${boundKey}; refusing to bind it to ${requestedKey} (${context.source})`,
    { entry: requestedKey, path: context.path, details: { slice, boundKey, requestedKey } },
  );
}

/** Who a slice is bound to, and the shard stamps recorded with the binding. */
export interface SliceOwner {
  key: string;
  stamps: readonly string[] | undefined;
}

/** An index slot: the owner of one slice and that slice's size. */
interface SizedSliceOwner extends SliceOwner {
  readonly sizeBytes: number;
}

/**
 * Slice key → its owner, by shard name, then offset: a lookup hashes a (usually interned) shard name
 * and a number instead of building a joined string. An offset holds one owner, which carries its
 * slice's size; only where slices of two sizes start at one offset (rare: a tensor and a view of
 * its first bytes) does it hold a Map by size. A Map per offset for the size alone was ~8 MB of a
 * 51 MB heap with 32,000 entries.
 */
export class SliceIndex {
  private readonly shards = new Map<string, Map<number, SizedSliceOwner | Map<number, SizedSliceOwner>>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(shardName: string, offsetBytes: number, sizeBytes: number): string | undefined {
    return this.getOwner(shardName, offsetBytes, sizeBytes)?.key;
  }

  getOwner(shardName: string, offsetBytes: number, sizeBytes: number): SliceOwner | undefined {
    const slot = this.shards.get(shardName)?.get(offsetBytes);
    if (slot === undefined) return undefined;
    if (slot instanceof Map) return slot.get(sizeBytes);
    return slot.sizeBytes === sizeBytes ? slot : undefined;
  }

  set(slice: SliceKeyTuple, key: string): void {
    const [shardName, offsetBytes, sizeBytes, stamps] = slice;
    let offsets = this.shards.get(shardName);
    if (!offsets) this.shards.set(shardName, (offsets = new Map()));
    const owner: SizedSliceOwner = { key, stamps, sizeBytes };
    const slot = offsets.get(offsetBytes);
    if (slot === undefined) {
      offsets.set(offsetBytes, owner);
      this.count++;
    } else if (slot instanceof Map) {
      if (!slot.has(sizeBytes)) this.count++;
      slot.set(sizeBytes, owner);
    } else if (slot.sizeBytes === sizeBytes) {
      offsets.set(offsetBytes, owner);
    } else {
      // A second size at this offset: both go into a Map by size.
      offsets.set(offsetBytes, new Map([[slot.sizeBytes, slot], [sizeBytes, owner]]));
      this.count++;
    }
  }
}

/** What planning needs to know about a state (the state itself or a draft over it). */
export interface StateView {
  getEntry(key: string): CacheEntry | undefined;
  ownerOf(slice: SliceKeyTuple): string | undefined;
  /** The stamps recorded with the slice's binding (undefined: none, or not bound). */
  stampsOf(slice: SliceKeyTuple): readonly string[] | undefined;
  sliceCount(key: string): number;
  readonly entryCount: number;
}

/**
 * The in-memory cache: entries by content key and slice owners by slice id. Mutated only
 * synchronously (between awaits), so concurrent async readers never see half an update.
 */
export class StoreState implements StateView {
  readonly entries = new Map<string, CacheEntry>();
  readonly sliceOwners = new SliceIndex();

  getEntry(key: string): CacheEntry | undefined {
    return this.entries.get(key);
  }

  ownerOf(slice: SliceKeyTuple): string | undefined {
    return this.sliceOwners.get(slice[0], slice[1], slice[2]);
  }

  stampsOf(slice: SliceKeyTuple): readonly string[] | undefined {
    return this.sliceOwners.getOwner(slice[0], slice[1], slice[2])?.stamps;
  }

  sliceCount(key: string): number {
    return this.entries.get(key)?.sliceKeys.length ?? 0;
  }

  get entryCount(): number {
    return this.entries.size;
  }

  /** Builds a state from validated entries; a slice listed under two entries is SLICE_CONFLICT. */
  static fromEntries(entries: Iterable<CacheEntry>, context: OpContext): StoreState {
    const state = new StoreState();
    for (const entry of entries) state.addLoadedEntry(entry, context);
    return state;
  }

  /** One step of fromEntries: adds a validated entry and binds its slices (SLICE_CONFLICT, SIZE_INVALID as there). */
  addLoadedEntry(entry: CacheEntry, context: OpContext): void {
    if (this.entries.size >= MAX_ENTRIES) {
      throw new StoreError('SIZE_INVALID', `more than MAX_ENTRIES (${MAX_ENTRIES}) entries`, { path: context.path, details: { limit: MAX_ENTRIES } });
    }
    this.entries.set(entry.key, entry);
    for (const slice of entry.sliceKeys) {
      const owner = this.ownerOf(slice);
      if (owner !== undefined && owner !== entry.key) throw sliceConflict(slice, owner, entry.key, context);
      this.sliceOwners.set(slice, entry.key);
    }
  }

  /** Checks every op against this state (all or nothing), then applies them. */
  applyOps(ops: readonly StoreOp[], context: OpContext): void {
    const draft = new StateDraft(this);
    for (const op of ops) draft.replay(op, context);
    this.applyChecked(draft.ops);
  }

  /** Applies ops a StateDraft accepted, grouping slice-list rewrites per entry. */
  applyChecked(ops: readonly StoreOp[]): void {
    const sliceLists = new Map<string, SliceKeyTuple[]>();
    const listFor = (key: string): SliceKeyTuple[] => {
      let list = sliceLists.get(key);
      if (!list) {
        list = [...(this.entries.get(key)?.sliceKeys ?? [])];
        sliceLists.set(key, list);
      }
      return list;
    };
    for (const op of ops) {
      if (op.kind === 'add') {
        this.entries.set(op.key, op.entry);
        for (const slice of op.entry.sliceKeys) this.sliceOwners.set(slice, op.key);
      } else if (op.kind === 'alias' || op.kind === 'rebind') {
        const [shardName, offsetBytes, sizeBytes] = op.slice;
        const owner = this.sliceOwners.get(shardName, offsetBytes, sizeBytes);
        const same = (s: SliceKeyTuple): boolean => s[0] === shardName && s[1] === offsetBytes && s[2] === sizeBytes;
        if (owner !== undefined && owner !== op.key) {
          const list = listFor(owner);
          const at = list.findIndex(same);
          if (at >= 0) list.splice(at, 1);
        }
        // Bound to this entry already: the op records its stamps in place.
        const list = listFor(op.key);
        const at = owner === op.key ? list.findIndex(same) : -1;
        if (at >= 0) list[at] = op.slice;
        else list.push(op.slice);
        this.sliceOwners.set(op.slice, op.key);
      }
    }
    for (const [key, list] of sliceLists) {
      const entry = this.entries.get(key);
      if (entry) this.entries.set(key, withSliceKeys(entry, list));
    }
  }
}

/**
 * Outcome of planning one alias ('bound' also when only the binding's stamps change; 'taken': a
 * conditional alias, `moveFrom`, of a slice bound to a third entry, left as it is).
 */
export type AliasPlan = 'absent' | 'already-bound' | 'bound' | 'taken';

/**
 * An overlay over a StoreState that plans ops: it answers "does this key exist / who owns this
 * slice" as if the ops accepted so far were applied, without touching the base.
 */
export class StateDraft implements StateView {
  readonly ops: StoreOp[] = [];
  private readonly added = new Map<string, CacheEntry>();
  private readonly owners = new Map<string, SliceOwner>();
  private readonly sliceDelta = new Map<string, number>();

  constructor(private readonly parent: StateView) {}

  getEntry(key: string): CacheEntry | undefined {
    return this.added.get(key) ?? this.parent.getEntry(key);
  }

  ownerOf(slice: SliceKeyTuple): string | undefined {
    const own = this.owners.get(sliceId(...slice));
    return own !== undefined ? own.key : this.parent.ownerOf(slice);
  }

  stampsOf(slice: SliceKeyTuple): readonly string[] | undefined {
    const own = this.owners.get(sliceId(...slice));
    return own !== undefined ? own.stamps : this.parent.stampsOf(slice);
  }

  sliceCount(key: string): number {
    return this.parent.sliceCount(key) + (this.sliceDelta.get(key) ?? 0);
  }

  get entryCount(): number {
    return this.parent.entryCount + this.added.size;
  }

  /** A draft over this draft: plan one request there, then absorb() it or drop it. */
  fork(): StateDraft {
    return new StateDraft(this);
  }

  /** Takes over what a fork of this draft planned. */
  absorb(child: StateDraft): void {
    for (const [key, entry] of child.added) this.added.set(key, entry);
    for (const [id, owner] of child.owners) this.owners.set(id, owner);
    for (const [key, delta] of child.sliceDelta) this.sliceDelta.set(key, (this.sliceDelta.get(key) ?? 0) + delta);
    this.ops.push(...child.ops);
  }

  /** Plans an add; false when the key exists. Throws SLICE_CONFLICT if one of its slices is bound elsewhere. */
  planAdd(entry: CacheEntry, context: OpContext): boolean {
    if (this.getEntry(entry.key)) return false;
    if (this.entryCount >= MAX_ENTRIES) {
      throw new StoreError('SIZE_INVALID', `the cache holds MAX_ENTRIES (${MAX_ENTRIES}) entries`, { entry: entry.key, details: { limit: MAX_ENTRIES } });
    }
    for (const slice of entry.sliceKeys) {
      const owner = this.ownerOf(slice);
      if (owner !== undefined && owner !== entry.key) throw sliceConflict(slice, owner, entry.key, context);
    }
    this.added.set(entry.key, entry);
    this.sliceDelta.set(entry.key, entry.sliceKeys.length);
    for (const slice of entry.sliceKeys) this.owners.set(sliceId(...slice), { key: entry.key, stamps: slice[3] });
    this.ops.push({ kind: 'add', key: entry.key, entry });
    return true;
  }

  /**
   * Plans an alias (or a rebind). Throws SLICE_CONFLICT / SLICE_SIZE_MISMATCH. With `moveFrom`
   * (AliasSliceItem.moveFrom) and no `rebind`, a slice bound to that entry is moved (a 'rebind' op),
   * and one bound to any entry but `key` and that one is 'taken', planning nothing.
   */
  planAlias(key: string, slice: SliceKeyTuple, rebind: boolean, context: OpContext, moveFrom?: string): AliasPlan {
    const entry = this.getEntry(key);
    if (!entry) return 'absent';
    if (slice[2] !== entry.rawBytes) {
      throw new StoreError('SLICE_SIZE_MISMATCH', `slice ${JSON.stringify(slice)} has ${slice[2]} bytes but the entry holds ${entry.rawBytes}`, {
        entry: key,
        path: context.path,
        details: { slice, rawBytes: entry.rawBytes },
      });
    }
    const owner = this.ownerOf(slice);
    if (owner === key) {
      // New stamps for the same binding (a copy of the file, a rewrite with these bytes, another
      // model's file of this name holding them, an object checked against it): mergeSliceStamps.
      const adding = slice[3] ?? [];
      const current = this.stampsOf(slice) ?? [];
      if (adding.every((stamp) => current.includes(stamp))) return 'already-bound';
      const stamps = mergeSliceStamps(current, adding);
      const restamped = Object.freeze([slice[0], slice[1], slice[2], stamps] as const);
      this.owners.set(sliceId(...slice), { key, stamps });
      this.ops.push({ kind: 'alias', key, slice: restamped });
      return 'bound';
    }
    if (owner !== undefined && !rebind && owner !== moveFrom) {
      // Bound to a third entry: a conditional alias leaves it to that binding's writer.
      if (moveFrom !== undefined) return 'taken';
      throw sliceConflict(slice, owner, key, context);
    }
    // The loader enforces MAX_SLICE_KEYS_PER_ENTRY; refuse here rather than write what cannot be read back.
    if (this.sliceCount(key) >= MAX_SLICE_KEYS_PER_ENTRY) {
      throw new StoreError('SIZE_INVALID', `the entry already has MAX_SLICE_KEYS_PER_ENTRY (${MAX_SLICE_KEYS_PER_ENTRY}) slice keys`, {
        entry: key,
        details: { limit: MAX_SLICE_KEYS_PER_ENTRY, slice },
      });
    }
    this.sliceDelta.set(key, (this.sliceDelta.get(key) ?? 0) + 1);
    if (owner !== undefined) this.sliceDelta.set(owner, (this.sliceDelta.get(owner) ?? 0) - 1);
    this.owners.set(sliceId(...slice), { key, stamps: slice[3] });
    this.ops.push({ kind: owner !== undefined ? 'rebind' : 'alias', key, slice });
    return 'bound';
  }

  /** Replays a journalled op with the same checks (a journal is input too). */
  replay(op: StoreOp, context: OpContext): void {
    if (op.kind === 'add') {
      this.planAdd(op.entry, context);
    } else if (op.kind === 'alias' || op.kind === 'rebind') {
      const plan = this.planAlias(op.key, op.slice, op.kind === 'rebind', context);
      if (plan === 'absent') {
        throw new StoreError('JOURNAL_INVALID', `${op.kind} of slice ${JSON.stringify(op.slice)} names an entry that does not exist (${context.source})`, {
          entry: op.key,
          path: context.path,
        });
      }
    }
  }
}
