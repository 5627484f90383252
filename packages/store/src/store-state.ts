import { StoreError } from './errors.js';
import { JOURNAL_VERSION, JOURNAL_VERSION_ONE_BINDING, MANIFEST_FORMAT, MANIFEST_FORMAT_ONE_BINDING, MAX_ENTRIES, MAX_SLICE_BINDINGS, MAX_SLICE_KEYS_PER_ENTRY } from './limits.js';
import { isSameStampSet, mergeSliceStamps } from './merge-slice-stamps.js';
import type { CacheEntry, SliceKeyTuple } from './types.js';
import { sliceId, withSliceKeys } from './validate-entry.js';
import { bindingInTheWay, bindingOfThisFile, compareBindingRecency, findBindingSetProblem, holdsObjectBindingBeside, stepSliceBindings, type BindingRule, type BindingStep, type BindingsPerFile, type SliceOwner } from './slice-bindings.js';

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
  /** The ops are a journal's (applyOps): a conflict names the rule of one binding per file they break. */
  journalled?: boolean;
}

/** What each rule says, for a SLICE_CONFLICT in a manifest's or journal's own bindings. */
function describeBindingRule(rule: BindingRule, journalled: boolean): string {
  switch (rule) {
    case 'too-many-bindings':
      return `a slice holds at most MAX_SLICE_BINDINGS (${MAX_SLICE_BINDINGS}) bindings`;
    case 'binding-without-file-stamp':
      return 'a binding beside another must hold a file stamp (one binding per file)';
    case 'stamp-held-twice':
      return 'a file stamp is held by one binding only (it is one file\'s bytes)';
    case 'second-binding-in-format-2':
      return journalled
        ? `a version-${JOURNAL_VERSION_ONE_BINDING} journal holds one binding per slice (a second one needs version ${JOURNAL_VERSION})`
        : `a format-${MANIFEST_FORMAT_ONE_BINDING} manifest holds one binding per slice (a second one needs format ${MANIFEST_FORMAT})`;
  }
}

/**
 * SLICE_CONFLICT. With `rule` (a manifest's entries, a journal's ops: damage, not a caller's
 * conflict), `details.reason` is the rule of one binding per file they break and the message names it.
 */
function sliceConflict(slice: SliceKeyTuple, boundKey: string, requestedKey: string, context: OpContext, rule?: BindingRule): StoreError {
  const broken = rule === undefined ? '' : `: ${describeBindingRule(rule, context.journalled === true)}`;
  return new StoreError(
    'SLICE_CONFLICT',
    `slice ${JSON.stringify(slice)} is bound to ${boundKey}; refusing to bind it to ${requestedKey}${broken} (${context.source})`,
    { entry: requestedKey, path: context.path, details: { slice, boundKey, requestedKey, ...(rule === undefined ? {} : { reason: rule }) } },
  );
}

/** The rule a journalled op's conflict breaks (undefined for a caller's op: a plain conflict, message unchanged). */
function journalRule(context: OpContext, bindingsPerFile: BindingsPerFile, step: BindingStep): BindingRule | undefined {
  if (context.journalled !== true) return undefined;
  if (!bindingsPerFile) return 'second-binding-in-format-2';
  return step.ok ? undefined : step.rule;
}

export type { SliceOwner };

/** An index slot: the owner of one slice and that slice's size. */
interface SizedSliceOwner extends SliceOwner {
  readonly sizeBytes: number;
}

/** An index slot of a slice with several bindings (one per file): its owners, latest first, and its size. */
class SizedBindingList {
  constructor(
    readonly sizeBytes: number,
    readonly owners: readonly SliceOwner[],
  ) {}
}

type SliceSlot = SizedSliceOwner | SizedBindingList;

const NO_OWNERS: readonly SliceOwner[] = Object.freeze([]);

/**
 * Slice key → its owner, by shard name, then offset: a lookup hashes a (usually interned) shard name
 * and a number instead of building a joined string. An offset holds one owner, which carries its
 * slice's size; only where slices of two sizes start at one offset (rare: a tensor and a view of
 * its first bytes) does it hold a Map by size. A Map per offset for the size alone was ~8 MB of a
 * 51 MB heap with 32,000 entries. A slice with several bindings (one per file) holds a list of
 * them; one binding stays one object.
 */
export class SliceIndex {
  private readonly shards = new Map<string, Map<number, SliceSlot | Map<number, SliceSlot>>>();
  private count = 0;
  private multiCount = 0;
  private objectBesideCount = 0;

  get size(): number {
    return this.count;
  }

  /** Slices holding a binding without a file stamp beside another (holdsObjectBindingBeside). */
  get objectBesideSlices(): number {
    return this.objectBesideCount;
  }

  /** Slices with more than one binding. */
  get multiBoundSlices(): number {
    return this.multiCount;
  }

  get(shardName: string, offsetBytes: number, sizeBytes: number): string | undefined {
    return this.getOwner(shardName, offsetBytes, sizeBytes)?.key;
  }

  /** The slice's latest binding. */
  getOwner(shardName: string, offsetBytes: number, sizeBytes: number): SliceOwner | undefined {
    const slot = this.slot(shardName, offsetBytes, sizeBytes);
    return slot instanceof SizedBindingList ? slot.owners[0] : slot;
  }

  /** Every binding of the slice, latest first. */
  getOwners(shardName: string, offsetBytes: number, sizeBytes: number): readonly SliceOwner[] {
    const slot = this.slot(shardName, offsetBytes, sizeBytes);
    if (slot === undefined) return NO_OWNERS;
    return slot instanceof SizedBindingList ? slot.owners : [slot];
  }

  /** The binding whose stamps hold `stamp`, else the latest (no allocation: the lookup path). */
  getOwnerFor(shardName: string, offsetBytes: number, sizeBytes: number, stamp: string | null | undefined): SliceOwner | undefined {
    const slot = this.slot(shardName, offsetBytes, sizeBytes);
    if (!(slot instanceof SizedBindingList)) return slot;
    if (typeof stamp === 'string') for (const owner of slot.owners) if (owner.stamps?.includes(stamp) === true) return owner;
    return slot.owners[0];
  }

  private slot(shardName: string, offsetBytes: number, sizeBytes: number): SliceSlot | undefined {
    const slot = this.shards.get(shardName)?.get(offsetBytes);
    if (slot === undefined) return undefined;
    if (slot instanceof Map) return slot.get(sizeBytes);
    return slot.sizeBytes === sizeBytes ? slot : undefined;
  }

  /** Binds the slice to `key` alone (its other bindings go). */
  set(slice: SliceKeyTuple, key: string): void {
    this.setOwners(slice[0], slice[1], slice[2], [{ key, stamps: slice[3] }]);
  }

  /** Sets the slice's bindings (latest first; none: unbound). */
  setOwners(shardName: string, offsetBytes: number, sizeBytes: number, owners: readonly SliceOwner[]): void {
    const before = this.slot(shardName, offsetBytes, sizeBytes);
    if (before instanceof SizedBindingList) {
      this.multiCount--;
      if (holdsObjectBindingBeside(before.owners)) this.objectBesideCount--;
    }
    if (before !== undefined) this.count--;
    let next: SliceSlot | undefined;
    if (owners.length === 1) next = { key: owners[0]!.key, stamps: owners[0]!.stamps, sizeBytes };
    else if (owners.length > 1) next = new SizedBindingList(sizeBytes, Object.freeze([...owners]));
    if (next instanceof SizedBindingList) {
      this.multiCount++;
      if (holdsObjectBindingBeside(next.owners)) this.objectBesideCount++;
    }
    if (next !== undefined) this.count++;
    let offsets = this.shards.get(shardName);
    if (!offsets) {
      if (next === undefined) return;
      this.shards.set(shardName, (offsets = new Map()));
    }
    const slot = offsets.get(offsetBytes);
    if (slot instanceof Map) {
      if (next === undefined) slot.delete(sizeBytes);
      else slot.set(sizeBytes, next);
    } else if (slot === undefined || slot.sizeBytes === sizeBytes) {
      if (next === undefined) offsets.delete(offsetBytes);
      else offsets.set(offsetBytes, next);
    } else if (next !== undefined) {
      // A second size at this offset: both go into a Map by size.
      offsets.set(offsetBytes, new Map([[slot.sizeBytes, slot], [sizeBytes, next]]));
    }
  }
}

/** What planning needs to know about a state (the state itself or a draft over it). */
export interface StateView {
  getEntry(key: string): CacheEntry | undefined;
  /** The entry the slice's latest binding names. */
  ownerOf(slice: SliceKeyTuple): string | undefined;
  /** The stamps recorded with the slice's latest binding (undefined: none, or not bound). */
  stampsOf(slice: SliceKeyTuple): readonly string[] | undefined;
  /** Every binding of the slice, latest first (one per file: FILE-BINDINGS.md). */
  bindingsOf(slice: SliceKeyTuple): readonly SliceOwner[];
  sliceCount(key: string): number;
  readonly entryCount: number;
  /** Whether some slice holds an object's binding beside another (format 4). */
  readonly holdsObjectBindingsBeside: boolean;
}

/**
 * The level at which an op re-stamping a binding keeps another binding left with only an object
 * stamp (stepSliceBindings' `leftLevel`): that of the journal the op goes to, so the draft, the
 * applying and a replay agree. 'objects' for a format-4 cache (version-3 journal) or a handle that
 * binds objects beside (its commit moves the cache to format 4 then); else dropped, as 0.57 did, for
 * a format-3 manifest and a version-2 journal never hold one (FILE-BINDINGS.md).
 */
function leftLevelOf(level: BindingsPerFile, state: { readonly holdsObjectBindingsBeside: boolean }): BindingsPerFile {
  return level === 'objects' || state.holdsObjectBindingsBeside ? 'objects' : true;
}

/** A binding an op dropped (AliasSlicesOptions.onBindingDropped). */
export interface DroppedBinding {
  slice: SliceKeyTuple;
  key: string;
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

  bindingsOf(slice: SliceKeyTuple): readonly SliceOwner[] {
    return this.sliceOwners.getOwners(slice[0], slice[1], slice[2]);
  }

  sliceCount(key: string): number {
    return this.entries.get(key)?.sliceKeys.length ?? 0;
  }

  get entryCount(): number {
    return this.entries.size;
  }

  /** Whether some slice holds more than one binding: the manifest is then format 3, its journal version 2. */
  get holdsSecondBindings(): boolean {
    return this.sliceOwners.multiBoundSlices > 0;
  }

  /** Whether some slice holds an object's binding (no file stamp) beside another: the manifest is then format 4, its journal version 3. */
  get holdsObjectBindingsBeside(): boolean {
    return this.sliceOwners.objectBesideSlices > 0;
  }

  /**
   * The bindings this state holds beside others, as a level (fromEntries): 'objects' where an
   * object's binding stands beside another (format 4), else whether any slice holds several
   * (format 3). A state rebuilt from this one's entries needs this level, or its own bindings
   * are SLICE_CONFLICT.
   */
  get bindingLevel(): BindingsPerFile {
    return this.holdsObjectBindingsBeside ? 'objects' : this.holdsSecondBindings;
  }

  /**
   * Builds a state from validated entries; a slice listed under two entries is SLICE_CONFLICT,
   * unless `bindingsPerFile` (a format-3 manifest) and the slice's bindings keep the rule
   * (isValidBindingSet).
   */
  static fromEntries(entries: Iterable<CacheEntry>, context: OpContext, bindingsPerFile: BindingsPerFile = false): StoreState {
    const state = new StoreState();
    for (const entry of entries) state.addLoadedEntry(entry, context, bindingsPerFile);
    return state;
  }

  /** One step of fromEntries: adds a validated entry and binds its slices (SLICE_CONFLICT, SIZE_INVALID as there). */
  addLoadedEntry(entry: CacheEntry, context: OpContext, bindingsPerFile: BindingsPerFile = false): void {
    if (this.entries.size >= MAX_ENTRIES) {
      throw new StoreError('SIZE_INVALID', `more than MAX_ENTRIES (${MAX_ENTRIES}) entries`, { path: context.path, details: { limit: MAX_ENTRIES } });
    }
    this.entries.set(entry.key, entry);
    for (const slice of entry.sliceKeys) {
      const current = this.bindingsOf(slice);
      if (current.length === 0) {
        this.sliceOwners.set(slice, entry.key);
        continue;
      }
      const others = current.filter((binding) => binding.key !== entry.key);
      const next = [...others, { key: entry.key, stamps: slice[3] }].sort(compareBindingRecency);
      const rule = !bindingsPerFile ? 'second-binding-in-format-2' : findBindingSetProblem(next, bindingsPerFile);
      if (rule !== undefined || others.length < current.length) throw sliceConflict(slice, current[0]!.key, entry.key, context, rule);
      this.sliceOwners.setOwners(slice[0], slice[1], slice[2], next);
    }
  }

  /** Checks every op against this state (all or nothing), then applies them. `bindingsPerFile`: a version-2 journal's ops, which may add a slice's second binding. */
  applyOps(ops: readonly StoreOp[], context: OpContext, bindingsPerFile: BindingsPerFile = false): void {
    const draft = new StateDraft(this);
    const journalled = { ...context, journalled: true };
    for (const op of ops) draft.replay(op, journalled, bindingsPerFile);
    this.applyChecked(draft.ops, bindingsPerFile);
  }

  /** Applies ops a StateDraft accepted at `level`, grouping slice-list rewrites per entry. */
  applyChecked(ops: readonly StoreOp[], level: BindingsPerFile): void {
    const sliceLists = new Map<string, SliceKeyTuple[]>();
    const listFor = (key: string): SliceKeyTuple[] => {
      let list = sliceLists.get(key);
      if (!list) {
        list = [...(this.entries.get(key)?.sliceKeys ?? [])];
        sliceLists.set(key, list);
      }
      return list;
    };
    const bind = (op: StoreOp & { key: string }, kind: 'alias' | 'rebind', slice: SliceKeyTuple): void => {
      const [shardName, offsetBytes, sizeBytes] = slice;
      const before = this.sliceOwners.getOwners(shardName, offsetBytes, sizeBytes);
      // Accepted by a draft over this state (at any level; 'objects' accepts what each accepts): never refused here.
      const step = stepSliceBindings(before, kind, op.key, slice[3], 'objects', leftLevelOf(level, this));
      if (!step.ok || step.outranked) throw new StoreError('SLICE_CONFLICT', 'internal: an accepted op does not apply', { entry: op.key, details: { slice } });
      const same = (s: SliceKeyTuple): boolean => s[0] === shardName && s[1] === offsetBytes && s[2] === sizeBytes;
      for (const binding of before) {
        if (binding.key === op.key) continue;
        const after = step.bindings.find((b) => b.key === binding.key);
        if (after !== undefined && after.stamps === binding.stamps) continue;
        const list = listFor(binding.key);
        const at = list.findIndex(same);
        if (at < 0) continue;
        if (after === undefined) list.splice(at, 1);
        else list[at] = Object.freeze([shardName, offsetBytes, sizeBytes, after.stamps] as const) as SliceKeyTuple;
      }
      if (op.kind !== 'add') {
        // Bound to this entry already: the op records its stamps in place.
        const list = listFor(op.key);
        const at = before.some((b) => b.key === op.key) ? list.findIndex(same) : -1;
        if (at >= 0) list[at] = slice;
        else list.push(slice);
      }
      this.sliceOwners.setOwners(shardName, offsetBytes, sizeBytes, step.bindings);
    };
    for (const op of ops) {
      if (op.kind === 'add') {
        this.entries.set(op.key, op.entry);
        for (const slice of op.entry.sliceKeys) bind(op, 'alias', slice);
      } else if (op.kind === 'alias' || op.kind === 'rebind') {
        bind(op, op.kind, op.slice);
      }
    }
    for (const [key, list] of sliceLists) {
      const entry = this.entries.get(key);
      if (entry) this.entries.set(key, withSliceKeys(entry, list));
    }
  }
}

/**
 * Outcome of planning one alias ('bound' also when only the binding's stamps change; 'already-bound'
 * also when its new stamps all rank last past MAX_SLICE_STAMPS, mergeSliceStamps; 'taken': a
 * conditional alias, `moveFrom`, of a slice bound to a third entry, left as it is; 'outranked': a
 * binding beside MAX_SLICE_BINDINGS others that ranks least recent of all, so it is the one dropped:
 * nothing planned, the drop reported with its own key).
 */
export type AliasPlan = 'absent' | 'already-bound' | 'bound' | 'taken' | 'outranked';

/**
 * An overlay over a StoreState that plans ops: it answers "does this key exist / who owns this
 * slice" as if the ops accepted so far were applied, without touching the base.
 */
export class StateDraft implements StateView {
  readonly ops: StoreOp[] = [];
  /** Bindings the planned ops drop (past MAX_SLICE_BINDINGS, or left without a file stamp). */
  readonly dropped: DroppedBinding[] = [];
  /** Whether a planned op adds a slice's binding beside another entry's (FILE-BINDINGS.md). */
  addsSecondBinding = false;
  /** Whether a planned op leaves a slice holding an object's binding beside another (format 4: FILE-BINDINGS.md phase 3). */
  addsObjectBindingBeside = false;
  private readonly added = new Map<string, CacheEntry>();
  private readonly owners = new Map<string, readonly SliceOwner[]>();
  private readonly sliceDelta = new Map<string, number>();

  constructor(private readonly parent: StateView) {}

  getEntry(key: string): CacheEntry | undefined {
    return this.added.get(key) ?? this.parent.getEntry(key);
  }

  bindingsOf(slice: SliceKeyTuple): readonly SliceOwner[] {
    return this.owners.get(sliceId(...slice)) ?? this.parent.bindingsOf(slice);
  }

  ownerOf(slice: SliceKeyTuple): string | undefined {
    return this.bindingsOf(slice)[0]?.key;
  }

  stampsOf(slice: SliceKeyTuple): readonly string[] | undefined {
    return this.bindingsOf(slice)[0]?.stamps;
  }

  sliceCount(key: string): number {
    return this.parent.sliceCount(key) + (this.sliceDelta.get(key) ?? 0);
  }

  get entryCount(): number {
    return this.parent.entryCount + this.added.size;
  }

  get holdsObjectBindingsBeside(): boolean {
    return this.addsObjectBindingBeside || this.parent.holdsObjectBindingsBeside;
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
    this.dropped.push(...child.dropped);
    this.addsSecondBinding ||= child.addsSecondBinding;
    this.addsObjectBindingBeside ||= child.addsObjectBindingBeside;
  }

  /** Whether planAdd would bind `slice` to a new entry `key` (unbound, or a second binding where `bindingsPerFile`). */
  canBind(key: string, slice: SliceKeyTuple, bindingsPerFile: BindingsPerFile): boolean {
    const current = this.bindingsOf(slice);
    if (current.length === 0 || current.some((binding) => binding.key === key)) return true;
    const step = stepSliceBindings(current, 'alias', key, slice[3], bindingsPerFile);
    return step.ok && (!step.beside || bindingsPerFile !== false);
  }

  /** Records a step's bindings for `slice`, with the slice counts of the entries it bound and unbound. */
  private record(slice: SliceKeyTuple, before: readonly SliceOwner[], step: BindingStep & { ok: true }): void {
    const after = new Set(step.bindings.map((binding) => binding.key));
    for (const binding of before) if (!after.has(binding.key)) this.sliceDelta.set(binding.key, (this.sliceDelta.get(binding.key) ?? 0) - 1);
    for (const key of step.dropped) this.dropped.push({ slice: Object.freeze([slice[0], slice[1], slice[2]] as const) as SliceKeyTuple, key });
    if (step.added) this.addsSecondBinding = true;
    if (holdsObjectBindingBeside(step.bindings) && !holdsObjectBindingBeside(before)) this.addsObjectBindingBeside = true;
    this.owners.set(sliceId(...slice), step.bindings);
  }

  /**
   * Plans an add; false when the key exists. Throws SLICE_CONFLICT if one of its slices is bound
   * elsewhere (with `bindingsPerFile`: unless it may take a binding beside the others', stepSliceBindings).
   */
  planAdd(entry: CacheEntry, context: OpContext, bindingsPerFile: BindingsPerFile = false): boolean {
    if (this.getEntry(entry.key)) return false;
    if (this.entryCount >= MAX_ENTRIES) {
      throw new StoreError('SIZE_INVALID', `the cache holds MAX_ENTRIES (${MAX_ENTRIES}) entries`, { entry: entry.key, details: { limit: MAX_ENTRIES } });
    }
    const steps: { slice: SliceKeyTuple; before: readonly SliceOwner[]; step: BindingStep & { ok: true } }[] = [];
    for (const slice of entry.sliceKeys) {
      const before = this.bindingsOf(slice);
      const step = stepSliceBindings(before, 'alias', entry.key, slice[3], bindingsPerFile);
      if (!step.ok || (step.beside && !bindingsPerFile)) throw sliceConflict(slice, step.ok ? before[0]!.key : step.boundKey, entry.key, context, journalRule(context, bindingsPerFile, step));
      steps.push({ slice, before, step });
    }
    // A slice whose new binding ranks least recent past MAX_SLICE_BINDINGS is not bound: the entry
    // is added (and journalled) without it, so a replay adds exactly what was planned.
    if (steps.some(({ step }) => step.outranked)) entry = withSliceKeys(entry, steps.filter(({ step }) => !step.outranked).map(({ slice }) => slice));
    this.added.set(entry.key, entry);
    this.sliceDelta.set(entry.key, entry.sliceKeys.length);
    for (const { slice, before, step } of steps) this.record(slice, before, step);
    this.ops.push({ kind: 'add', key: entry.key, entry });
    return true;
  }

  /**
   * Plans an alias (or a rebind). Throws SLICE_CONFLICT / SLICE_SIZE_MISMATCH. With `moveFrom`
   * (AliasSliceItem.moveFrom) and no `rebind`, a slice whose binding in the way (bindingInTheWay)
   * is that entry's is moved (a 'rebind' op), also where `bindingsPerFile` would allow a binding
   * beside it, and one bound otherwise is 'taken', planning nothing.
   * With `bindingsPerFile`, a slice bound to other entries takes a binding beside theirs where the
   * rule allows (stepSliceBindings): an 'alias' op.
   */
  planAlias(key: string, slice: SliceKeyTuple, rebind: boolean, context: OpContext, moveFrom?: string, bindingsPerFile: BindingsPerFile = false, replaying?: 'alias' | 'rebind'): AliasPlan {
    const entry = this.getEntry(key);
    if (!entry) return 'absent';
    if (slice[2] !== entry.rawBytes) {
      throw new StoreError('SLICE_SIZE_MISMATCH', `slice ${JSON.stringify(slice)} has ${slice[2]} bytes but the entry holds ${entry.rawBytes}`, {
        entry: key,
        path: context.path,
        details: { slice, rawBytes: entry.rawBytes },
      });
    }
    const before = this.bindingsOf(slice);
    const mine = before.find((binding) => binding.key === key);
    if (mine !== undefined) {
      // New stamps for the same binding (a copy of the file, a rewrite with these bytes, another
      // model's file of this name holding them, an object checked against it): mergeSliceStamps.
      const adding = slice[3] ?? [];
      const current = mine.stamps ?? [];
      if (adding.every((stamp) => current.includes(stamp))) return 'already-bound';
      const stamps = mergeSliceStamps(current, adding);
      // Every new stamp ranked last past MAX_SLICE_STAMPS (its file changed before those of the 16
      // kept): nothing changes, nothing is journalled; its reader checks the bytes again next time.
      if (isSameStampSet(current, stamps)) return 'already-bound';
      const restamped = Object.freeze([slice[0], slice[1], slice[2], stamps] as const);
      const step = stepSliceBindings(before, 'alias', key, stamps, bindingsPerFile, leftLevelOf(bindingsPerFile, this));
      if (!step.ok) throw sliceConflict(slice, step.boundKey, key, context);
      this.record(slice, before, step);
      this.ops.push({ kind: 'alias', key, slice: restamped });
      return 'bound';
    }
    let kind: 'alias' | 'rebind' = 'alias';
    // A journalled rebind is replayed as one (a handle without sliceBindingsPerFile moved a binding
    // where one with it would have added one beside it).
    let step = stepSliceBindings(before, replaying === 'rebind' && before.length > 0 ? 'rebind' : 'alias', key, slice[3], bindingsPerFile);
    // `moveFrom` naming the binding this alias would move (this file's before it changed in place):
    // moved in this one op even where a binding beside it is allowed, rather than added beside and
    // unbound after (two format changes, a crash between leaving both, an eviction at capacity).
    const movesFrom = moveFrom !== undefined && step.ok && step.beside && moveFrom === bindingOfThisFile(before, slice[3]);
    if (replaying === 'rebind' && before.length > 0) kind = 'rebind';
    else if (!step.ok || (step.beside && !bindingsPerFile) || movesFrom) {
      const boundKey = step.ok ? (before.find((b) => b.key === bindingInTheWay(before, slice[3])) ?? before[0]!).key : step.boundKey;
      if (!rebind && (moveFrom === undefined || moveFrom !== bindingInTheWay(before, slice[3]))) {
        // Bound to a third entry: a conditional alias leaves it to that binding's writer.
        if (moveFrom !== undefined) return 'taken';
        throw sliceConflict(slice, boundKey, key, context, journalRule(context, bindingsPerFile, step));
      }
      kind = 'rebind';
      step = stepSliceBindings(before, 'rebind', key, slice[3]);
      if (!step.ok) throw sliceConflict(slice, step.boundKey, key, context);
    }
    if (!step.ok) throw sliceConflict(slice, step.boundKey, key, context);
    if (step.outranked) {
      // Dropped as soon as bound: nothing to journal, the drop reported (onBindingDropped).
      this.record(slice, before, step);
      return 'outranked';
    }
    // The loader enforces MAX_SLICE_KEYS_PER_ENTRY; refuse here rather than write what cannot be read back.
    if (this.sliceCount(key) >= MAX_SLICE_KEYS_PER_ENTRY) {
      throw new StoreError('SIZE_INVALID', `the entry already has MAX_SLICE_KEYS_PER_ENTRY (${MAX_SLICE_KEYS_PER_ENTRY}) slice keys`, {
        entry: key,
        details: { limit: MAX_SLICE_KEYS_PER_ENTRY, slice },
      });
    }
    this.sliceDelta.set(key, (this.sliceDelta.get(key) ?? 0) + 1);
    this.record(slice, before, step);
    this.ops.push({ kind: before.length > 0 && kind === 'rebind' ? 'rebind' : 'alias', key, slice });
    return 'bound';
  }

  /** Replays a journalled op with the same checks (a journal is input too). `bindingsPerFile`: a version-2 journal's op. */
  replay(op: StoreOp, context: OpContext, bindingsPerFile: BindingsPerFile = false): void {
    if (op.kind === 'add') {
      this.planAdd(op.entry, context, bindingsPerFile);
    } else if (op.kind === 'alias' || op.kind === 'rebind') {
      const plan = this.planAlias(op.key, op.slice, op.kind === 'rebind', context, undefined, bindingsPerFile, op.kind);
      if (plan === 'absent') {
        throw new StoreError('JOURNAL_INVALID', `${op.kind} of slice ${JSON.stringify(op.slice)} names an entry that does not exist (${context.source})`, {
          entry: op.key,
          path: context.path,
        });
      }
    }
  }
}
