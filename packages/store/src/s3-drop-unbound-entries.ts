// Removing the entries no slice is bound to from an S3 cache (S3CacheStore.dropUnboundEntries). No
// writer lock there: intent objects (s3-drop-intents.ts) tell gc, other drops and a later resolver
// which entries a drop may still put back (README "S3 layout", Removing entries).
import { randomBytes } from 'node:crypto';
import { isDroppableEntry, reportDrop } from './drop-unbound-entries.js';
import { StoreError, isStoreError } from './errors.js';
import { mapLimited } from './map-limited.js';
import { DROP_ID_HEX_CHARS, SLICES_DIR, STAMPS_DIR, blobObjectName, dropIntentObjectName, parseEntryObjectName, topAliasKeys } from './s3-layout.js';
import { isPerFileNow, keysWithEntryOrIntent, perFileBoundKeys, type PerFileFormat } from './s3-slice-binding-set.js';
import { DROP_INTENT_STALE_MS, aliasTimes, boundKeysAfter, deleteDroppedBlob, encodeDropIntent, isNewSince, isValidEntryObject, restoreEntryObject } from './s3-drop-intents.js';
import { sameSecond, type ListedObject, type S3Transport } from './s3-transport.js';
import type { CacheEntry, DropStopReason, DropStopped, DropUnboundEntriesReport } from './types.js';

/** An entry object the drop judged unbound, with the listing's look at it. */
export interface S3UnboundCandidate {
  object: ListedObject;
  entry: CacheEntry;
}

/** Every key at some slice's top alias epoch: bound (a conflicted slice's keys all count, either may win its rebind). */
function boundKeysOf(names: Iterable<string>): Set<string> {
  const keys = new Set<string>();
  for (const { keys: top } of topAliasKeys(names).values()) for (const key of top) keys.add(key);
  return keys;
}

/**
 * The entry objects of `listing` (the whole prefix, listed once) the drop removes: its key at no
 * slice's top alias epoch, the entry droppable (isDroppableEntry: empty tensors' entries stay), and
 * the object at least `minAgeMs` old (a writer's addEntries PUTs the entry object before its
 * aliases: a younger one may be between the two). `entryOf`: the entry an object holds, undefined
 * when unread or unreadable (such an object is not judged: it stays).
 */
export function findS3UnboundEntries(
  listing: readonly ListedObject[],
  entryOf: (name: string) => CacheEntry | undefined,
  nowMs: number,
  minAgeMs: number,
  perFile = false,
): S3UnboundCandidate[] {
  const bound = boundKeysOf(listing.map((object) => object.name));
  // Format 2 (FILE-BINDINGS.md, phase 2): a key bound below its slice's top epoch (by its stamps) is bound too.
  if (perFile) {
    const hasEntry = keysWithEntryOrIntent(listing);
    for (const key of perFileBoundKeys(listing.filter((o) => o.name.startsWith(SLICES_DIR)), listing.filter((o) => o.name.startsWith(STAMPS_DIR)), (k) => hasEntry.has(k))) bound.add(key);
  }
  const out: S3UnboundCandidate[] = [];
  for (const object of listing) {
    const name = parseEntryObjectName(object.name);
    if (!name || bound.has(name.key) || nowMs - object.lastModifiedMs < minAgeMs) continue;
    const entry = entryOf(object.name);
    if (entry !== undefined && isDroppableEntry(entry)) out.push({ object, entry });
  }
  return out;
}

/**
 * Candidates per batch: each batch's intents live from its first intent PUT to its last intent
 * DELETE, one listing of slices/ in between, so a batch stays well inside DROP_INTENT_STALE_MS; and
 * the listing's cost (O(aliases)) is paid once per this many entries, not once per entry.
 */
export const DROP_BATCH_ENTRIES = 128;

/**
 * The most a batch may take, from before its first intent PUT to any entry or blob DELETE, and the
 * most age its own intent may show before an entry DELETE: half DROP_INTENT_STALE_MS, so a resolver
 * (which acts on intents that old) never judges an intent of a batch that still deletes. Past it
 * (a drop paused: a laptop asleep, a debugger, a clock hours behind) the batch stops: no more
 * entry or blob DELETEs, its entries deleted so far put back if bound, the others' intents left to
 * the resolver. Wall-clock time (Date.now counts a sleep; performance.now may not).
 */
const DROP_INTENT_STALE_MS_GUARD = DROP_INTENT_STALE_MS / 2;

/** A candidate whose entry object this drop deleted, with the bytes its intent holds. */
type Deleted = S3UnboundCandidate & { bytes: Uint8Array; intent: string };

/**
 * Removes `candidates` (findS3UnboundEntries, judged on `firstListing`, which began at `judgedAtMs`
 * by the judging clock: stored in each intent for a resolver), DROP_BATCH_ENTRIES at a
 * time (README "S3 layout", Removing entries):
 * 1. per candidate, its bytes are read and PUT as an intent object (`dropping/…<dropId>`); only then
 *    is the entry object deleted, looked at before each DELETE attempt (gone already: another drop's;
 *    written again since the listing: a writer's, kept);
 * 2. slices/ is listed again: a key at a slice's top epoch, or with an alias object not in
 *    `firstListing` (or written again since), is bound, and its entry is PUT back from the intent's
 *    bytes (conditionally: a writer's new object wins), its blob untouched (`blobsMissing` if gone);
 * 3. the other entries' blobs go under deleteDroppedBlob's rule (entry absent, no other drop's intent
 *    for it, the blob not stored again);
 * 4. the batch's intents are deleted.
 * An intent left by a failure or a kill is resolved later, as these steps would, once
 * DROP_INTENT_STALE_MS old (resolveStaleDropIntents: gc and every drop). If step 1 fails and the
 * listing of step 2 fails too, the first failure is thrown, the second in its details.
 */
export async function dropS3UnboundEntries(
  transport: S3Transport,
  candidates: readonly S3UnboundCandidate[],
  firstListing: readonly ListedObject[],
  judgedAtMs: number,
  minAgeMs: number,
  maxEntryObjectBytes: number,
  perFile: PerFileFormat = false,
): Promise<DropUnboundEntriesReport> {
  const dropId = randomBytes(DROP_ID_HEX_CHARS / 2).toString('hex');
  const isNew = isNewSince(aliasTimes(firstListing));
  const hasEntry = keysWithEntryOrIntent(firstListing);
  const dropped: CacheEntry[] = [];
  const blobsLeft: string[] = [];
  const blobsMissing: string[] = [];
  const restoreConflicts: string[] = [];
  let reclaimedBytes = 0;
  let stopped: DropStopped | undefined;
  for (let at = 0; at < candidates.length; at += DROP_BATCH_ENTRIES) {
    const batch = await dropBatch(transport, candidates.slice(at, at + DROP_BATCH_ENTRIES), dropId, isNew, judgedAtMs, minAgeMs, maxEntryObjectBytes, perFile, hasEntry);
    dropped.push(...batch.dropped);
    blobsLeft.push(...batch.blobsLeft);
    blobsMissing.push(...batch.blobsMissing);
    restoreConflicts.push(...batch.restoreConflicts);
    reclaimedBytes += batch.reclaimedBytes;
    // Paused past DROP_INTENT_STALE_MS_GUARD: the judging listing is hours old; a later drop judges afresh.
    if (batch.stopped !== undefined) {
      stopped = batch.stopped;
      break;
    }
  }
  // Only blobs this run deleted (not those gone already, nor those in blobsLeft).
  const report: DropUnboundEntriesReport = { ...reportDrop(dropped, false, blobsLeft.sort()), reclaimedBytes };
  if (blobsMissing.length > 0) report.blobsMissing = blobsMissing.sort();
  if (restoreConflicts.length > 0) report.restoreConflicts = restoreConflicts.sort();
  if (stopped !== undefined) report.stopped = stopped;
  return report;
}

async function dropBatch(
  transport: S3Transport,
  candidates: readonly S3UnboundCandidate[],
  dropId: string,
  isNew: (object: ListedObject) => boolean,
  judgedAtMs: number,
  minAgeMs: number,
  maxEntryObjectBytes: number,
  perFile: PerFileFormat,
  hasEntry: ReadonlySet<string>,
): Promise<{ dropped: CacheEntry[]; blobsLeft: string[]; blobsMissing: string[]; restoreConflicts: string[]; reclaimedBytes: number; stopped?: DropStopped }> {
  const limit = transport.settings.maxConcurrentRequests;
  const startedMs = Date.now();
  // Why the batch stopped (the first reason seen), or undefined while it goes on.
  let stopReason: DropStopReason | undefined;
  const pausedTooLong = (): boolean => {
    if (stopReason === undefined && Date.now() - startedMs > DROP_INTENT_STALE_MS_GUARD) stopReason = 'paused';
    return stopReason !== undefined;
  };
  // A failure (the server unreachable, say) stops the DELETEs, not step 2 for those done: a writer
  // may have bound one of them meanwhile. The first is thrown after that, and no blob goes.
  let failure: { error: unknown } | undefined;
  /** Intents PUT by this batch (deleted at its end, but for those of entries deleted and not judged). */
  const intents = new Set<string>();
  // Per candidate (in their order, for a report that does not depend on timing): its bytes once deleted.
  const outcomes = await mapLimited(candidates, limit, async (candidate): Promise<Deleted | undefined> => {
    if (failure !== undefined || pausedTooLong()) return undefined;
    const { object } = candidate;
    const intent = dropIntentObjectName(object.name, dropId);
    let sent = false;
    let kept = false;
    let bytes: Uint8Array | undefined;
    try {
      bytes = await transport.getSmallObject(object.name, maxEntryObjectBytes);
      // Gone, or not an entry object now (rewritten damaged since the listing): not dropped; an
      // intent is only ever bytes that pass an entry object's checks.
      if (bytes === undefined || !isValidEntryObject(transport, object.name, bytes)) return undefined;
      // The intent first: a gc, another drop or a resolver that finds the entry object gone finds
      // this, and leaves its blob (this drop may put the entry back).
      await transport.putObject(intent, encodeDropIntent(bytes, judgedAtMs), 'application/json');
      intents.add(intent);
      await transport.deleteObject(object.name, async () => {
        const head = await transport.headObject(object.name);
        // Gone before any DELETE of ours: another drop's (it puts it back if need be).
        if (head === undefined) return false;
        kept = !sameSecond(head.lastModifiedMs, object.lastModifiedMs);
        if (kept) return false;
        // Our own intent, right before the DELETE: gone (a resolver took it: it may have judged the
        // entry and deleted its blob) or old enough for one to take it, this batch stops.
        const own = await transport.headObject(intent);
        if (own === undefined) stopReason ??= 'intent-gone';
        else if (transport.judgingNowMs() - own.lastModifiedMs >= DROP_INTENT_STALE_MS_GUARD) stopReason ??= 'intent-old';
        if (pausedTooLong()) return false;
        sent = true;
        return true;
      });
    } catch (error) {
      failure ??= { error };
    }
    // A retry that finds it gone may follow our own DELETE, whose reply was lost (or a failed
    // attempt may have deleted it): counted as ours.
    return sent && !kept && bytes !== undefined ? { ...candidate, bytes, intent } : undefined;
  });
  const deleted = outcomes.filter((outcome) => outcome !== undefined);
  const deletedIntents = new Set(deleted.map((d) => d.intent));
  // Intents of entries this batch did not delete guard nothing of it.
  await removeIntents(transport, [...intents].filter((name) => !deletedIntents.has(name)));
  const stoppedWith = (leftToResolver: string[]): DropStopped | undefined =>
    stopReason === undefined ? undefined : { reason: stopReason, leftToResolver: leftToResolver.sort() };
  if (deleted.length === 0 && failure === undefined) return { dropped: [], blobsLeft: [], blobsMissing: [], restoreConflicts: [], reclaimedBytes: 0, stopped: stoppedWith([]) };
  let listedAgain: ListedObject[];
  let stampsAgain: ListedObject[] = [];
  let perFileNow = false;
  try {
    // The format after the listing of slices/, then stamps/ (a beside binding's stamp is PUT before its alias).
    listedAgain = await transport.list(SLICES_DIR);
    perFileNow = await isPerFileNow(perFile);
    if (perFileNow) stampsAgain = await transport.list(STAMPS_DIR);
  } catch (error) {
    // The first failure says why the drop stopped; the listing's only that nothing was put back.
    // The deleted entries' intents stay: a later gc or drop resolves them (put back or blob gone).
    if (failure === undefined) throw error;
    throw withRelistFailure(failure.error, error, deleted.length);
  }
  const boundNow = boundKeysAfter(listedAgain, isNew);
  const deletedKeys = new Set(deleted.map((d) => d.entry.key));
  // What binds: the judging listing's entry objects and intents, and this batch's deleted entries
  // (their intents): a key missed there binds nothing, which keeps more bound, never less.
  if (perFileNow) for (const key of perFileBoundKeys(listedAgain, stampsAgain, (k) => hasEntry.has(k) || deletedKeys.has(k))) boundNow.add(key);
  const restored = deleted.filter(({ entry }) => boundNow.has(entry.key));
  const blobsMissing: string[] = [];
  const restoreConflicts: string[] = [];
  await mapLimited(restored, limit, async ({ object, bytes, intent }) => {
    const name = parseEntryObjectName(object.name)!;
    // Its bytes passed the entry checks before its intent's PUT: 'invalid' cannot come.
    const outcome = await restoreEntryObject(transport, object.name, bytes);
    // Refused with the entry still absent: its intent stays, a later resolver puts it back.
    if (outcome === 'conflict') return void restoreConflicts.push(object.name);
    if (outcome === 'blob-missing') blobsMissing.push(blobObjectName(name.key, name.blobSha256));
    await transport.deleteObject(intent);
  });
  // Their blobs stay (the intents of the rest stay too: resolved later, as for a killed drop).
  if (failure !== undefined) throw failure.error;
  // Paused too long: no blob DELETE (a resolver may judge these intents now); they resolve them.
  const rest = deleted.filter(({ entry }) => !boundNow.has(entry.key));
  if (pausedTooLong()) return { dropped: [], blobsLeft: [], blobsMissing, restoreConflicts, reclaimedBytes: 0, stopped: stoppedWith(rest.map(({ object }) => object.name)) };
  const blobsLeft: string[] = [];
  let reclaimedBytes = 0;
  const blobKept = await mapLimited(rest, limit, async ({ object, intent, entry }) => {
    const name = parseEntryObjectName(object.name)!;
    let verdict: 'deleted' | 'kept' | 'gone' | 'failed';
    try {
      verdict = await deleteDroppedBlob(transport, object.name, intent, minAgeMs);
    } catch (error) {
      // The entry object is gone: its blob is an orphan now (or its intent's, resolved later).
      if (!isStoreError(error)) throw error;
      blobsLeft.push(blobObjectName(name.key, name.blobSha256));
      return false;
    }
    if (verdict === 'deleted') reclaimedBytes += entry.compBytes;
    await transport.deleteObject(intent);
    return verdict === 'kept';
  });
  // A blob stored again by a writer, or kept for another drop's intent: nothing of that entry went.
  const dropped = rest.filter((_, at) => !blobKept[at]).map(({ entry }) => entry);
  return { dropped, blobsLeft, blobsMissing, restoreConflicts, reclaimedBytes, stopped: stoppedWith([]) };
}

/** Deletes intent objects, every one tried; a failure leaves that intent for a resolver (harmless: it keeps a blob a while). */
async function removeIntents(transport: S3Transport, names: readonly string[]): Promise<void> {
  await mapLimited(names, transport.settings.maxConcurrentRequests, async (name) => {
    try {
      await transport.deleteObject(name);
    } catch (error) {
      if (!isStoreError(error)) throw error;
    }
  });
}

/**
 * The DELETE failure `first` that stopped a drop, once the listing of slices/ after it failed too
 * (`second`): the same code and cause, its message saying that `deletedCount` entry objects were
 * deleted and not checked for bindings made meanwhile, `details.relistError` the second failure.
 * Not a StoreError (a bug): thrown as it is.
 */
function withRelistFailure(first: unknown, second: unknown, deletedCount: number): unknown {
  if (!isStoreError(first)) return first;
  const relistError = isStoreError(second) ? { code: second.code, message: second.message } : { message: String(second) };
  return new StoreError(
    first.code,
    `${first.reason}; slices/ could not be listed again after it either (${relistError.message}): ${deletedCount} entry object${deletedCount === 1 ? '' : 's'} deleted by this drop ${deletedCount === 1 ? 'was' : 'were'} not checked for a binding made meanwhile; no blob was deleted (those entries' blobs are orphans now: gc removes them)`,
    { entry: first.entry, path: first.path, details: { ...first.details, relistError, deletedEntries: deletedCount }, cause: first.cause },
  );
}
