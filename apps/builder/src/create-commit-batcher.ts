// Group commit for the build's writes. On an s3:// cache every addEntries/aliasSlices call lists the
// prefix afterwards (to see its own writes and catch racing aliases), so one call per tensor costs
// O(objects) per tensor; calls made while a commit runs are merged into the next one instead. On a
// directory the store groups concurrent calls itself (one journal record and fsync for all of
// them), and each call there stages its own blob, so a write that fails (ENOSPC) fails only its
// own tensor while the others commit: calls go straight through (`batch: false`). Removals of
// bindings are merged on both: the store does not group those (a directory cache rewrites its
// manifest for each unbindSlices call).
import type { AddEntryInput, AddEntryResult, CacheStore, SliceKeyTuple } from '@splitzip/store';

export interface AliasRequest {
  key: string;
  shardName: string;
  offsetBytes: number;
  sizeBytes: number;
  /** The shard's stamp, recorded with the binding. */
  stamp?: string;
  /**
   * AliasSliceItem.moveFrom: the binding in the way (this file's before it changed in place) that
   * this alias moves in one op, so that no binding goes beside it first. Such an item is sent
   * without `rebind` (with it the store ignores moveFrom, and binds beside a file-stamped one).
   */
  moveFrom?: string;
}

/** A binding to remove: the slice, and the entry it must still be bound to (UnbindSliceItem.key). */
export interface UnbindRequest {
  key: string;
  shardName: string;
  offsetBytes: number;
  sizeBytes: number;
}

/**
 * An alias's answer: true bound (or bound already); false not bound (the entry is absent);
 * 'outranked' not bound because this very binding ranked least recent past MAX_SLICE_BINDINGS (the
 * store reports it dropped with this key: AliasSlicesOptions.onBindingDropped). Not truthy-safe:
 * compare with 'outranked' before reading the answer as a boolean.
 */
export type AliasAnswer = boolean | 'outranked';

export interface CommitBatcher {
  /** Commits the entry with the next batch; resolves with its own result. */
  addEntry(input: AddEntryInput): Promise<AddEntryResult>;
  /** Binds the slice with the next batch; resolves with its own answer (AliasAnswer). */
  aliasSlice(item: AliasRequest): Promise<AliasAnswer>;
  /**
   * Removes the slice's binding to `item.key` with the next batch; resolves whether this call
   * removed it: false where the slice is bound after it (another writer moved it to another entry,
   * or bound it there again meanwhile), or the store removed nothing (another writer did first).
   */
  unbindSlice(item: UnbindRequest): Promise<boolean>;
}

interface Pending<I, R> {
  input: I;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

export interface CommitBatcherOptions {
  /**
   * Applies to every alias of the build (the CLI's --rebind). A store binding per file (a directory
   * cache) moves only a binding that holds the alias's stamp or has no file stamp: one of another
   * file's takes the binding beside it, rebind or not.
   */
  rebind: boolean;
  batch: boolean;
  /**
   * Told of each binding a commit dropped (a slice past MAX_SLICE_BINDINGS loses its least recent
   * file's binding: AliasSlicesOptions.onBindingDropped, AddEntryResult.droppedBindings).
   */
  onBindingDropped?: ((slice: SliceKeyTuple, key: string) => void) | undefined;
}

export function createCommitBatcher(store: CacheStore, options: CommitBatcherOptions): CommitBatcher {
  const onBindingDropped = options.onBindingDropped;
  // One aliasSlices call; an item answered false whose own binding the call reports dropped (the
  // store's 'outranked': it ranked least recent past MAX_SLICE_BINDINGS, so nothing was bound) is
  // answered 'outranked', not read as an absent entry.
  const aliasCall = async (items: readonly AliasRequest[], rebind: boolean): Promise<AliasAnswer[]> => {
    if (items.length === 0) return [];
    const droppedIds = new Set<string>();
    const bound = await store.aliasSlices(items, {
      rebind,
      onBindingDropped: (slice, key) => {
        droppedIds.add(droppedId(slice[0], slice[1], slice[2], key));
        onBindingDropped?.(slice, key);
      },
    });
    return bound.map((answer, i) => {
      const item = items[i]!;
      return !answer && droppedIds.has(droppedId(item.shardName, item.offsetBytes, item.sizeBytes, item.key)) ? 'outranked' : answer;
    });
  };
  // Moves (moveFrom) go in a call of their own without rebind; the rest as the build says.
  const aliasAll = async (items: readonly AliasRequest[]): Promise<AliasAnswer[]> => {
    const moves = items.filter((item) => item.moveFrom !== undefined);
    if (moves.length === 0) return aliasCall(items, options.rebind);
    const rest = items.filter((item) => item.moveFrom === undefined);
    const [restAnswers, moveAnswers] = [await aliasCall(rest, options.rebind), await aliasCall(moves, false)];
    return items.map((item) => (item.moveFrom === undefined ? restAnswers.shift()! : moveAnswers.shift()!));
  };
  // Adds report their drops in their results.
  const tellDropped = (results: AddEntryResult[]): AddEntryResult[] => {
    for (const result of results) for (const dropped of result.droppedBindings ?? []) onBindingDropped?.(dropped.slice, dropped.key);
    return results;
  };
  let adds: Pending<AddEntryInput, AddEntryResult>[] = [];
  let aliases: Pending<AliasRequest, AliasAnswer>[] = [];
  let unbinds: Pending<UnbindRequest, boolean>[] = [];
  let running: Promise<void> | undefined;

  const settle = <I, R>(batch: Pending<I, R>[], results: Promise<R[]>): Promise<void> =>
    results.then(
      (values) => batch.forEach((p, i) => p.resolve(values[i]!)),
      (error: unknown) => batch.forEach((p) => p.reject(error)),
    );

  const flush = async (): Promise<void> => {
    // Let the calls of this turn of the event loop join the batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (adds.length > 0 || aliases.length > 0 || unbinds.length > 0) {
      const addBatch = adds;
      const aliasBatch = aliases;
      const unbindBatch = unbinds;
      adds = [];
      aliases = [];
      unbinds = [];
      // Entries first: an alias may name an entry of the same batch.
      if (addBatch.length > 0) await settle(addBatch, store.addEntries(addBatch.map((p) => p.input)).then(tellDropped));
      if (aliasBatch.length > 0) await settle(aliasBatch, aliasAll(aliasBatch.map((p) => p.input)));
      if (unbindBatch.length > 0) await settle(unbindBatch, unbindAll(store, unbindBatch.map((p) => p.input)));
    }
    running = undefined;
  };

  const enqueue = <I, R>(queue: Pending<I, R>[], input: I): Promise<R> =>
    new Promise<R>((resolve, reject) => {
      queue.push({ input, resolve, reject });
      running ??= flush();
    });

  return {
    addEntry: options.batch ? (input) => enqueue(adds, input) : async (input) => tellDropped([await store.addEntry(input)])[0]!,
    aliasSlice: options.batch
      ? (item) => enqueue(aliases, item)
      : async (item) => (await aliasAll([item]))[0]!,
    unbindSlice: (item) => enqueue(unbinds, item),
  };
}

/** A dropped binding's identity: its slice (without stamps) and entry. */
function droppedId(shardName: string, offsetBytes: number, sizeBytes: number, key: string): string {
  return JSON.stringify([shardName, offsetBytes, sizeBytes, key]);
}

/**
 * One unbindSlices call; each item's answer from the store's state after it (caught up by the call).
 * The store counts removals, not which: a call that removed none answers false for all. Where every
 * item whose binding to `item.key` is gone now counts in the removals, each of them was removed by
 * it. Otherwise (another writer's --rebind moved one meanwhile) only those whose slice is unbound
 * now, or bound only to entries it was bound to before the call, are answered true: a slice bound to
 * a new entry may have been moved, not removed. Other files' bindings kept beside (one binding per
 * file) do not make the answer false.
 */
async function unbindAll(store: CacheStore, items: readonly UnbindRequest[]): Promise<boolean[]> {
  const keysOf = (item: UnbindRequest): Set<string> =>
    new Set(store.lookupSliceBindings(item.shardName, item.offsetBytes, item.sizeBytes).map((binding) => binding.entry.key));
  const before = items.map(keysOf);
  const removed = await store.unbindSlices(items);
  if (removed === 0) return items.map(() => false);
  const after = items.map(keysOf);
  const gone = after.map((keys, i) => !keys.has(items[i]!.key));
  if (gone.filter(Boolean).length === removed) return gone;
  // A slice whose binding went to an entry it was not bound to before (another writer's move) may
  // not have been removed by this call; one left with only bindings it had (other files' beside
  // it, one binding per file) was. Counting only slices left unbound under-counted unbound_stale.
  return after.map((keys, i) => gone[i]! && [...keys].every((key) => before[i]!.has(key)));
}
