// Group commit for the build's writes. On an s3:// cache every addEntries/aliasSlices call lists the
// prefix afterwards (to see its own writes and catch racing aliases), so one call per tensor costs
// O(objects) per tensor; calls made while a commit runs are merged into the next one instead. On a
// directory the store groups concurrent calls itself (one journal record and fsync for all of
// them), and each call there stages its own blob, so a write that fails (ENOSPC) fails only its
// own tensor while the others commit: calls go straight through (`batch: false`).
import type { AddEntryInput, AddEntryResult, CacheStore } from '@splitzip/store';

export interface AliasRequest {
  key: string;
  shardName: string;
  offsetBytes: number;
  sizeBytes: number;
  /** The shard's stamp, recorded with the binding. */
  stamp?: string;
}

export interface CommitBatcher {
  /** Commits the entry with the next batch; resolves with its own result. */
  addEntry(input: AddEntryInput): Promise<AddEntryResult>;
  /** Binds the slice with the next batch; false when the entry is absent. */
  aliasSlice(item: AliasRequest): Promise<boolean>;
}

interface Pending<I, R> {
  input: I;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/** `rebind` applies to every alias of the build (the CLI's --rebind). */
export function createCommitBatcher(store: CacheStore, options: { rebind: boolean; batch: boolean }): CommitBatcher {
  if (!options.batch) {
    return {
      addEntry: (input) => store.addEntry(input),
      aliasSlice: async (item) => (await store.aliasSlices([item], { rebind: options.rebind }))[0]!,
    };
  }
  let adds: Pending<AddEntryInput, AddEntryResult>[] = [];
  let aliases: Pending<AliasRequest, boolean>[] = [];
  let running: Promise<void> | undefined;

  const settle = <I, R>(batch: Pending<I, R>[], results: Promise<R[]>): Promise<void> =>
    results.then(
      (values) => batch.forEach((p, i) => p.resolve(values[i]!)),
      (error: unknown) => batch.forEach((p) => p.reject(error)),
    );

  const flush = async (): Promise<void> => {
    // Let the calls of this turn of the event loop join the batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (adds.length > 0 || aliases.length > 0) {
      const addBatch = adds;
      const aliasBatch = aliases;
      adds = [];
      aliases = [];
      // Entries first: an alias may name an entry of the same batch.
      if (addBatch.length > 0) await settle(addBatch, store.addEntries(addBatch.map((p) => p.input)));
      if (aliasBatch.length > 0) await settle(aliasBatch, store.aliasSlices(aliasBatch.map((p) => p.input), { rebind: options.rebind }));
    }
    running = undefined;
  };

  const enqueue = <I, R>(queue: Pending<I, R>[], input: I): Promise<R> =>
    new Promise<R>((resolve, reject) => {
      queue.push({ input, resolve, reject });
      running ??= flush();
    });

  return {
    addEntry: (input) => enqueue(adds, input),
    aliasSlice: (item) => enqueue(aliases, item),
  };
}
