// Removing the entries no slice is bound to from an S3 cache (S3CacheStore.dropUnboundEntries). No
// writer lock there: the order of the steps and a look before each DELETE keep it safe beside
// writers (README "S3 layout", dropUnboundEntries).
import { isDroppableEntry, reportDrop } from './drop-unbound-entries.js';
import { isStoreError } from './errors.js';
import { mapLimited } from './map-limited.js';
import { SLICES_DIR, blobObjectName, entryObjectName, parseEntryObjectName, topAliasKeys } from './s3-layout.js';
import type { ListedObject, S3Transport } from './s3-transport.js';
import type { CacheEntry, DropUnboundEntriesReport } from './types.js';

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

/** Whether an object's two Last-Modified readings are one write: to the second (HEAD gives an HTTP date, a listing may give milliseconds). */
function sameSecond(aMs: number, bMs: number): boolean {
  return Math.floor(aMs / 1000) === Math.floor(bMs / 1000);
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
 * and a build stores the tensor again. The report names the entries that went and stayed gone.
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
  const boundNow = boundKeysOf((await transport.list(SLICES_DIR)).map((object) => object.name));
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
        kept = Date.now() - head.lastModifiedMs < minAgeMs || (await transport.headObject(entryObjectName(name.key, name.blobSha256))) !== undefined;
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
