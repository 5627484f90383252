// Removing the entries no slice is bound to from an S3 cache (S3CacheStore.dropUnboundEntries). No
// writer lock there: the caller asserts the cache is quiet (`exclusive`), the store refuses one
// written to lately, and the order of the steps and a look before each DELETE are a safety net for
// a wrong assurance, not a guarantee (README "S3 layout", Removing entries).
import { isDroppableEntry, reportDrop } from './drop-unbound-entries.js';
import { StoreError, isStoreError } from './errors.js';
import { formatAge } from './format-age.js';
import { mapLimited } from './map-limited.js';
import { BLOBS_DIR, ENTRIES_DIR, SLICES_DIR, STAMPS_DIR, blobObjectName, entryObjectName, parseEntryObjectName, topAliasKeys } from './s3-layout.js';
import { describeClockOffset, sameSecond, type ListedObject, type S3Transport } from './s3-transport.js';
import type { CacheEntry, DropUnboundEntriesReport } from './types.js';

/** An entry object the drop judged unbound, with the listing's look at it. */
export interface S3UnboundCandidate {
  object: ListedObject;
  entry: CacheEntry;
}

/**
 * INVALID_ARGUMENT (`details.reason: 'exclusive-required'`) for a real S3 drop without `exclusive:
 * true`. Without a lock the drop's steps leave races that lose data beside another gc, another drop
 * or a writer (a blob deleted under an entry put back, a reported binding missed and its entry
 * deleted for good): closing them needs a protocol change, so the drop runs only where the caller
 * says nothing else writes.
 */
export function s3DropNeedsExclusive(root: string): StoreError {
  return new StoreError(
    'INVALID_ARGUMENT',
    'dropUnboundEntries on an s3:// cache needs `exclusive: true` (splitzip gc: --exclusive): the assurance that nothing else writes to the cache during the drop (no build, no gc, no other drop, no loader with write access: loaders record stamps and may move slices), which the store cannot check; ' +
      "beside any of them the drop can lose data (a gc or a second drop may delete the blob of an entry this drop puts back for a writer; a writer's binding may be missed and its entry deleted for good). " +
      'Stop them, then run it with exclusive; a dry run (dryRun: true) needs no assurance',
    { path: root, details: { option: 'exclusive', reason: 'exclusive-required' } },
  );
}

/** The top-level folders a writer writes to: an object there younger than minAgeMs is a writer at work. */
const WRITTEN_DIRS = [ENTRIES_DIR, SLICES_DIR, STAMPS_DIR, BLOBS_DIR];

/**
 * How far ahead of the judging clock a Last-Modified may be and still be "just now": the server
 * sends its Date and Last-Modified to the second, and the SDK's offset takes a reply's Date against
 * this machine's clock on its arrival, so an object written a moment ago may read up to ~1 s (plus
 * the request's latency) in the future. Beyond this, the clocks disagree and the message says so.
 */
export const CLOCK_READING_SLACK_MS = 5_000;

/**
 * An offset between this machine's clock and the server's worth naming in a refusal (ages are
 * judged on the earlier of the two, so it deleted nothing, but one clock wants fixing): well above
 * the second the Date header's resolution and a request's latency account for.
 */
export const CLOCK_OFFSET_NOTED_MS = 60_000;

/**
 * The clock the drop judges ages by: `nowMs`, the earlier of this machine's clock and the server's
 * as its replies' Date header gives it (S3Transport.judgingNowMs), with `appliedOffsetMs` added to
 * this machine's clock to get it (S3Transport.judgingOffsetMs: 0 or below), and `offsetMs`, the
 * server's time minus this machine's (S3Transport.clockOffsetMs, 0: none known), for the message.
 */
export interface JudgingClock {
  nowMs: number;
  offsetMs: number;
  appliedOffsetMs: number;
}

/** The newest young object's age for the refusal: in ms, or how far its Last-Modified is in the future and whose clock to check. */
function describeNewest(name: string, ageMs: number, appliedOffsetMs: number): string {
  if (ageMs >= -CLOCK_READING_SLACK_MS) return `the newest ${formatAge(Math.max(0, ageMs))} old (${name})`;
  const ahead = formatAge(-ageMs);
  // Judged on this machine's clock (no offset known, or the server's Date is later still): it is
  // behind the clock that stamped Last-Modified. Judged on the server's Date (this machine's clock
  // is later): the server's own Date and Last-Modified disagree (nodes behind one endpoint with
  // different clocks, or a proxy's Date).
  return appliedOffsetMs === 0
    ? `the newest (${name}) with a Last-Modified ${ahead} ahead of this machine's clock: check its clock`
    : `the newest (${name}) with a Last-Modified ${ahead} ahead of the server's time as its replies' Date header gives it: check the server's clocks (its nodes', a proxy's)`;
}

/** Which clock judged the ages and which to fix, for an offset of CLOCK_OFFSET_NOTED_MS or more. */
function describeJudgingClock(offsetMs: number): string {
  const offset = describeClockOffset(offsetMs);
  // The server's Date ahead may be this machine's clock behind or a Date from another clock than
  // Last-Modified's (a proxy's, a node's): the message cannot tell which.
  return offsetMs < 0
    ? `ages are judged on the server's clock, the earlier: this machine's is ${offset}, fix it`
    : `ages are judged on this machine's clock, the earlier: this machine's is ${offset} by its replies' Date header; fix this machine's clock, or the server's if its Date runs ahead (a proxy's, a node's)`;
}

/**
 * Refuses (INVALID_ARGUMENT, `details.reason: 'recent-writes'`) a drop of a cache written to within
 * `minAgeMs` of `clock.nowMs`: any object of `listing` under entries/, slices/, stamps/ or blobs/, or any
 * unfinished multipart upload, that young. A build writes continuously and a loader records stamps,
 * so such an object says the cache was not quiet lately, whatever `exclusive` asserts. The message
 * counts them and gives the newest one's age, or, where its Last-Modified is ahead of `clock`, by
 * how much and whose clock to check; and the offset of this machine's clock to the server's when
 * it is large (ages are judged on the server's: `clock`).
 */
export function checkS3CacheQuiet(
  listing: readonly ListedObject[],
  uploads: readonly { name: string; initiatedMs: number }[],
  clock: JudgingClock,
  minAgeMs: number,
  root: string,
): void {
  const { nowMs, offsetMs, appliedOffsetMs } = clock;
  const young = listing.filter((object) => WRITTEN_DIRS.some((dir) => object.name.startsWith(dir)) && nowMs - object.lastModifiedMs < minAgeMs);
  const youngUploads = uploads.filter((upload) => nowMs - upload.initiatedMs < minAgeMs);
  if (young.length === 0 && youngUploads.length === 0) return;
  const newest = [...young.map((o) => ({ name: o.name, atMs: o.lastModifiedMs })), ...youngUploads.map((u) => ({ name: u.name, atMs: u.initiatedMs }))].reduce((a, b) => (b.atMs > a.atMs ? b : a));
  // Negative: its Last-Modified is ahead of the clock judged by (as young as can be, and a clock is wrong).
  const newestAgeMs = nowMs - newest.atMs;
  const offsetNote = Math.abs(offsetMs) < CLOCK_OFFSET_NOTED_MS ? '' : ` (${describeJudgingClock(offsetMs)})`;
  const what = [
    young.length === 0 ? '' : `${young.length} object${young.length === 1 ? '' : 's'} under entries/, slices/, stamps/ or blobs/`,
    youngUploads.length === 0 ? '' : `${youngUploads.length} unfinished upload${youngUploads.length === 1 ? '' : 's'}`,
  ]
    .filter(Boolean)
    .join(' and ');
  throw new StoreError(
    'INVALID_ARGUMENT',
    `dropUnboundEntries refuses: the cache was written to recently, ${what} younger than minAgeMs (${formatAge(minAgeMs)}), ${describeNewest(newest.name, newestAgeMs, appliedOffsetMs)}${offsetNote}: ` +
      'a build, a loader recording stamps or another maintenance run was at work, and the drop needs the cache quiet; stop every writer and run it again once nothing has been written for minAgeMs',
    { path: root, details: { reason: 'recent-writes', recentObjects: young.length, recentUploads: youngUploads.length, newestAgeMs, newestObject: newest.name, minAgeMs, clockOffsetMs: offsetMs } },
  );
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
): S3UnboundCandidate[] {
  const bound = boundKeysOf(listing.map((object) => object.name));
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
 * Removes `candidates` (findS3UnboundEntries), in this order:
 * 1. each entry object's bytes are read, then the object is deleted, looked at before each DELETE
 *    attempt (gone already: another drop's; written again since the listing: a writer's, kept);
 * 2. slices/ is listed again: a deleted entry whose key a top-epoch alias binds now (a writer bound
 *    it between the listing and the DELETE) is PUT back with the bytes read, its blob untouched;
 * 3. the other entries' blobs are deleted, each looked at before every attempt, as gc does an
 *    orphan's: kept when an entry object of it exists again or the blob is younger than `minAgeMs`
 *    (a writer stored the key again).
 * A writer whose alias lands after step 2 finds its entry gone and answers false (writeAliases),
 * and a build stores the tensor again. The report names the entries this drop deleted and did not
 * put back, whose blobs no writer stored again: the cache's state after it only while nothing else
 * ran (`exclusive`): another drop may put back an entry counted here. If step 1 fails and the
 * listing of step 2 fails too, the first failure is thrown, the second in its details.
 */
export async function dropS3UnboundEntries(
  transport: S3Transport,
  candidates: readonly S3UnboundCandidate[],
  minAgeMs: number,
  maxEntryObjectBytes: number,
): Promise<DropUnboundEntriesReport> {
  const limit = transport.settings.maxConcurrentRequests;
  // A failure (the server unreachable, say) stops the DELETEs, not step 2 for those done: a writer
  // may have bound one of them meanwhile. The first is thrown after that, and no blob goes.
  let failure: { error: unknown } | undefined;
  // Per candidate (in their order, for a report that does not depend on timing): its bytes once deleted.
  const outcomes = await mapLimited(candidates, limit, async (candidate): Promise<(S3UnboundCandidate & { bytes: Uint8Array }) | undefined> => {
    if (failure !== undefined) return undefined;
    const { object } = candidate;
    let sent = false;
    let kept = false;
    let bytes: Uint8Array | undefined;
    try {
      bytes = await transport.getSmallObject(object.name, maxEntryObjectBytes);
      if (bytes === undefined) return undefined;
      await transport.deleteObject(object.name, async () => {
        const head = await transport.headObject(object.name);
        // Gone before any DELETE of ours: another drop's (it puts it back if need be).
        if (head === undefined) return false;
        kept = !sameSecond(head.lastModifiedMs, object.lastModifiedMs);
        if (kept) return false;
        sent = true;
        return true;
      });
    } catch (error) {
      failure ??= { error };
    }
    // A retry that finds it gone may follow our own DELETE, whose reply was lost (or a failed
    // attempt may have deleted it): counted as ours.
    return sent && !kept && bytes !== undefined ? { ...candidate, bytes } : undefined;
  });
  const deleted = outcomes.filter((outcome) => outcome !== undefined);
  if (deleted.length === 0 && failure === undefined) return reportDrop([], false);
  let listedAgain: ListedObject[];
  try {
    listedAgain = await transport.list(SLICES_DIR);
  } catch (error) {
    // The first failure says why the drop stopped; the listing's only that nothing was put back.
    if (failure === undefined) throw error;
    throw withRelistFailure(failure.error, error, deleted.length);
  }
  const boundNow = boundKeysOf(listedAgain.map((object) => object.name));
  const restored = deleted.filter(({ entry }) => boundNow.has(entry.key));
  await mapLimited(restored, limit, ({ object, bytes }) => transport.putObject(object.name, bytes, 'application/json'));
  // Their blobs stay (orphans now, gc's): the report of this drop is the error.
  if (failure !== undefined) throw failure.error;
  const rest = deleted.filter(({ entry }) => !boundNow.has(entry.key));
  const blobsLeft: string[] = [];
  const blobKept = await mapLimited(rest, limit, async ({ object }) => {
    const name = parseEntryObjectName(object.name)!;
    const blob = blobObjectName(name.key, name.blobSha256);
    let kept = false;
    try {
      await transport.deleteObject(blob, async () => {
        const head = await transport.headObject(blob);
        if (head === undefined) return false;
        kept = transport.judgingNowMs() - head.lastModifiedMs < minAgeMs || (await transport.headObject(entryObjectName(name.key, name.blobSha256))) !== undefined;
        return !kept;
      });
    } catch (error) {
      // The entry object is gone: its blob is an orphan now, gc's to remove.
      if (!isStoreError(error)) throw error;
      blobsLeft.push(blob);
    }
    return kept;
  });
  // A blob stored again by a writer (the key is back): nothing of that entry went.
  const dropped = rest.filter((_, at) => !blobKept[at]).map(({ entry }) => entry);
  return reportDrop(dropped, false, blobsLeft.sort());
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
