// A dropUnboundEntries run's intent objects on an s3:// cache (README "S3 layout", Removing
// entries): which keys count as bound after the drop's DELETEs, when a dropped entry's blob may go,
// putting an entry back from its intent, and resolving the intents a killed drop left.
import { checkBlobDeletable } from './check-blob-deletable.js';
import { isStoreError } from './errors.js';
import { parseS3EntryObject } from './parse-s3-entry-object.js';
import { mapLimited } from './map-limited.js';
import { isPerFileNow, keysWithEntryOrIntent, perFileBoundKeys, type PerFileFormat } from './s3-slice-binding-set.js';
import { DROPPING_DIR, ENTRIES_DIR, SLICES_DIR, STAMPS_DIR, blobObjectName, parseDropIntentObjectName, parseEntryObjectName, parseSliceObjectName, topAliasKeys } from './s3-layout.js';
import { sameSecond, type ListedObject, type S3Transport } from './s3-transport.js';
import type { StaleDropResolution } from './types.js';

/**
 * An intent object this old belongs to a drop that was killed (or lost its server) between its
 * entry DELETE and the end of that entry's steps: gc and every drop resolve it then (put the entry
 * back if bound, else judge its blob). A live drop keeps an intent for one batch (DROP_BATCH_ENTRIES
 * entries: an intent PUT, a DELETE, one listing of slices/, a PUT back or a blob DELETE each), seconds
 * to minutes even on a bucket of millions of aliases; 6 h leaves two orders of magnitude. A drop
 * paused longer (a laptop asleep, a debugger, its clock hours behind) may find a resolver beside it:
 * before each entry DELETE it looks at its own intent (gone, or DROP_INTENT_STALE_MS/2 old) and at
 * the wall-clock time since its batch began, and stops the batch there, its intents left to the
 * resolver; its put back looks at the blob first. The cost of waiting: a killed drop's
 * bound entries resolve to nothing (readers read those tensors raw) for up to this long. Never
 * below the run's minAgeMs (the resolvers take the larger).
 */
export const DROP_INTENT_STALE_MS = 6 * 60 * 60 * 1000;

/** The name → Last-Modified of a listing's alias objects: the drop's first listing, to tell new ones. */
export function aliasTimes(listing: readonly ListedObject[]): Map<string, number> {
  const times = new Map<string, number>();
  for (const object of listing) if (object.name.startsWith(SLICES_DIR)) times.set(object.name, object.lastModifiedMs);
  return times;
}

/**
 * The keys a listing of slices/ made after the drop's DELETEs shows bound: at a slice's top epoch
 * (a conflicted slice's keys all count), or with any alias object `isNew` says was written since
 * the drop judged (a writer's binding another writer's short-lived alias above it may hide from
 * this listing: it was reported made, so its entry must stay).
 */
export function boundKeysAfter(slices: readonly ListedObject[], isNew: (object: ListedObject) => boolean): Set<string> {
  const keys = new Set<string>();
  for (const { keys: top } of topAliasKeys(slices.map((object) => object.name)).values()) for (const key of top) keys.add(key);
  for (const object of slices) {
    const alias = parseSliceObjectName(object.name);
    if (alias && isNew(object)) keys.add(alias.key);
  }
  return keys;
}

/** An alias object not in the first listing, or written again since (Last-Modified to the second). */
export function isNewSince(first: ReadonlyMap<string, number>): (object: ListedObject) => boolean {
  return (object) => {
    const listedMs = first.get(object.name);
    return listedMs === undefined || !sameSecond(listedMs, object.lastModifiedMs);
  };
}

/**
 * Puts a dropped entry object back from its intent's `bytes`, conditionally (a writer that created
 * it again meanwhile wins: 412 is fine; a 409, a conditional write racing another, is looked at and
 * tried again, as the writer's own PUT does); a server without the condition gets a look, then a
 * plain PUT. Bytes that fail an entry object's checks are never put back ('invalid'). Its blob is
 * looked at BEFORE the PUT: missing (a resolver judged the entry unbound and gc or the resolver
 * deleted the blob while this drop was paused), the entry is not put back (an entry without its
 * blob is BLOB_MISSING for every reader): 'blob-missing', reported in `blobsMissing`. Refused
 * with the entry still absent after the last backoff: 'conflict' (the caller keeps the intent). A blob deleted inside the one round trip between that look and the PUT is
 * window (i) (README "S3 layout").
 */
export async function restoreEntryObject(transport: S3Transport, entryName: string, bytes: Uint8Array): Promise<'restored' | 'blob-missing' | 'invalid' | 'conflict'> {
  const parsed = parseEntryObjectName(entryName)!;
  // Never an entry object that fails the checks of one (a damaged intent): reported instead.
  if (!isValidEntryObject(transport, entryName, bytes)) return 'invalid';
  if ((await transport.headObject(blobObjectName(parsed.key, parsed.blobSha256))) === undefined) return 'blob-missing';
  for (let attempt = 0; ; attempt++) {
    const outcome = await transport.putObjectIfAbsent(entryName, bytes, 'application/json');
    if (outcome === 'unsupported' && (await transport.headObject(entryName)) === undefined) await transport.putObject(entryName, bytes, 'application/json');
    // 'exists' is a 412 or a 409 (another conditional write of it running, which may fail): looked at.
    if (outcome !== 'exists' || (await transport.headObject(entryName)) !== undefined) return 'restored';
    // Refused every time with the entry still absent: not put back. The caller keeps the intent
    // (a later resolver tries again) and reports it, never a binding left pointing at nothing.
    if (attempt >= RESTORE_CONFLICT_BACKOFF_MS.length) return 'conflict';
    await sleepMs(RESTORE_CONFLICT_BACKOFF_MS[attempt]!);
  }
}

function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whether `bytes` pass the checks of an entry object named `entryName` (parseS3EntryObject). */
export function isValidEntryObject(transport: S3Transport, entryName: string, bytes: Uint8Array): boolean {
  try {
    parseS3EntryObject(entryName, bytes, transport.describe(entryName));
    return true;
  } catch (error) {
    if (!isStoreError(error)) throw error;
    return false;
  }
}

/**
 * The waits between a put back's refusals with the entry object still absent (a 409: another
 * conditional write of it running): short and bounded (350 ms in all), then it is a 'conflict'.
 */
const RESTORE_CONFLICT_BACKOFF_MS = [50, 100, 200] as const;

/**
 * Deletes the blob of a dropped entry object, looked at right before each DELETE attempt by
 * checkBlobDeletable (the order gc's orphan blobs share): only while the entry object is absent, no
 * intent object of the entry other than `ownIntent` exists (another drop may still put the entry
 * back) and `ownIntent` (when given) still does (a resolver took it: this run's verdict is stale),
 * the entry object absent still after that look (a drop that put it back and removed its intent
 * between the two), and, looked at LAST, right before the DELETE, the blob at least `minAgeMs` old
 * (a writer stored it again). Resolves 'deleted', 'kept' (any of those said no) or 'gone' (absent already).
 */
export async function deleteDroppedBlob(transport: S3Transport, entryName: string, ownIntent: string | undefined, minAgeMs: number): Promise<'deleted' | 'kept' | 'gone'> {
  const parsed = parseEntryObjectName(entryName)!;
  const blob = blobObjectName(parsed.key, parsed.blobSha256);
  let verdict: 'deleted' | 'kept' | 'gone' = 'gone';
  await transport.deleteObject(blob, async () => {
    const { outcome } = await checkBlobDeletable(transport, entryName, ownIntent, minAgeMs);
    verdict = outcome === 'deletable' ? 'deleted' : outcome === 'gone' ? 'gone' : 'kept';
    return outcome === 'deletable';
  });
  return verdict;
}

/** What resolving the stale intents did (gc's and the drop's report show it). */
export interface StaleIntentOutcome extends StaleDropResolution {
  /** The intent objects resolved and deleted. */
  resolved: string[];
  intentsInvalid: string[];
  restoreConflicts: string[];
  entriesLost: string[];
}

/** The parts of `outcome` a report carries: undefined when it did nothing and nothing failed. */
export function staleDropResolutionOf(outcome: StaleIntentOutcome): StaleDropResolution | undefined {
  const { restored, blobsDeleted, blobsMissing, intentsInvalid, restoreConflicts, entriesLost, error } = outcome;
  if (restored.length + blobsDeleted.length + blobsMissing.length + intentsInvalid.length + restoreConflicts.length === 0 && error === undefined) return undefined;
  return {
    restored,
    blobsDeleted,
    blobsMissing,
    ...(intentsInvalid.length === 0 ? {} : { intentsInvalid }),
    ...(restoreConflicts.length === 0 ? {} : { restoreConflicts }),
    ...(entriesLost.length === 0 ? {} : { entriesLost }),
    ...(error === undefined ? {} : { error }),
  };
}

/** A resolver's failure as a report field. Not a StoreError (a bug): thrown as it is. */
export function resolutionErrorOf(error: unknown): { code: string; message: string } {
  if (!isStoreError(error)) throw error;
  return { code: error.code, message: error.message };
}

/** What an intent object's body holds (intents came with 0.53.0, in this format only). */
const DROP_INTENT_FORMAT = 'splitzip-drop-intent/1';

/**
 * An intent object's body: the entry object's bytes (base64) and when the drop's judging listing
 * began (the judging clock: the earlier of this machine's and the server's), so a resolver counts an
 * alias written since then as bound, as the live drop does. JSON with exactly these three fields.
 */
export function encodeDropIntent(entryBytes: Uint8Array, judgedAtMs: number): Uint8Array {
  const body = { format: DROP_INTENT_FORMAT, judged_at_ms: Math.floor(judgedAtMs), entry_base64: Buffer.from(entryBytes).toString('base64') };
  return new TextEncoder().encode(JSON.stringify(body));
}

/** Base64 of the largest entry object, and the envelope around it. */
export function maxIntentObjectBytes(maxEntryObjectBytes: number): number {
  return 4 * Math.ceil(maxEntryObjectBytes / 3) + 256;
}

/**
 * The entry bytes and judging time an intent body holds, or undefined when the body is not exactly
 * encodeDropIntent's: a damaged intent (every release that writes intents writes this format).
 */
export function decodeDropIntent(body: Uint8Array): { entryBytes: Uint8Array; judgedAtMs: number } | undefined {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    return undefined;
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
  const fields = json as Record<string, unknown>;
  const keys = Object.keys(fields).sort();
  if (keys.join(',') !== 'entry_base64,format,judged_at_ms' || fields.format !== DROP_INTENT_FORMAT) return undefined;
  const { judged_at_ms: judgedAtMs, entry_base64: base64 } = fields;
  if (typeof judgedAtMs !== 'number' || !Number.isSafeInteger(judgedAtMs) || judgedAtMs < 0 || typeof base64 !== 'string') return undefined;
  const entryBytes = Buffer.from(base64, 'base64');
  // Strict: base64 that does not round-trip is damaged (Buffer skips what it cannot read).
  if (entryBytes.toString('base64') !== base64) return undefined;
  return { entryBytes: new Uint8Array(entryBytes), judgedAtMs };
}

/**
 * Resolves the intent objects at least max(DROP_INTENT_STALE_MS, minAgeMs) old (a killed drop's), as
 * that drop's own steps would have: the entry is bound when its key is at a slice's top epoch now, or
 * has an alias object written since the drop's judging listing began (its time in the intent; to the
 * second, as Last-Modified goes) — then it is put back if absent; else its blob goes under
 * deleteDroppedBlob's rule (no other intent of it). A damaged intent (a body not encodeDropIntent's,
 * or entry bytes failing the checks) is reported in intentsInvalid and resolved by its name, judged
 * from its Last-Modified: entry present, or unbound (the blob rule), as any; bound with the entry
 * absent, nothing can be put back: reported in entriesLost. The intent is deleted last. Errors of one intent do not stop the others;
 * the first is the outcome's `error` (the intent stays for the next resolver); a listing's failure is
 * thrown.
 */
export async function resolveStaleDropIntents(transport: S3Transport, minAgeMs: number, maxEntryObjectBytes: number, perFile: PerFileFormat = false): Promise<StaleIntentOutcome> {
  const staleMs = Math.max(DROP_INTENT_STALE_MS, minAgeMs);
  const nowMs = transport.judgingNowMs();
  const intents = await transport.list(DROPPING_DIR);
  const stale = intents.filter((object) => parseDropIntentObjectName(object.name) !== undefined && nowMs - object.lastModifiedMs >= staleMs);
  const outcome: StaleIntentOutcome = { resolved: [], restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: [], restoreConflicts: [], entriesLost: [] };
  if (stale.length === 0) return outcome;
  const slices = await transport.list(SLICES_DIR);
  // Once for all intents: the keys at a top epoch, and each key's newest alias object.
  const topKeys = boundKeysAfter(slices, () => false);
  // Format 2 (FILE-BINDINGS.md, phase 2): a key bound below its slice's top epoch (by its stamps) is bound too.
  // The format is looked at after the listing of slices/ (a move before it shows), then stamps/ listed.
  // What binds (perFileBoundKeys): an entry object or an intent, as for the view, gc and the drop.
  if (await isPerFileNow(perFile)) {
    const [stamps, entries] = await Promise.all([transport.list(STAMPS_DIR), transport.list(ENTRIES_DIR)]);
    const hasEntry = keysWithEntryOrIntent([...entries, ...intents]);
    for (const key of perFileBoundKeys(slices, stamps, (k) => hasEntry.has(k))) topKeys.add(key);
  }
  const newestAliasMs = new Map<string, number>();
  for (const object of slices) {
    const alias = parseSliceObjectName(object.name);
    if (alias) newestAliasMs.set(alias.key, Math.max(newestAliasMs.get(alias.key) ?? -Infinity, object.lastModifiedMs));
  }
  await mapLimited(stale, transport.settings.maxConcurrentRequests, async (intent) => {
    const parsed = parseDropIntentObjectName(intent.name)!;
    try {
      const body = await transport.getSmallObject(intent.name, maxIntentObjectBytes(maxEntryObjectBytes));
      // Gone since the listing: another resolver's.
      if (body === undefined) return;
      const decoded = decodeDropIntent(body);
      // A damaged intent is resolved by its name (the entry object's), judged from its own
      // Last-Modified (no later than the drop's judging listing): never kept for good, with the
      // key's blob, stamps and aliases.
      if (decoded === undefined) outcome.intentsInvalid.push(intent.name);
      const judgedAtMs = decoded?.judgedAtMs ?? intent.lastModifiedMs;
      const newestMs = newestAliasMs.get(parsed.key);
      // An alias object written since the drop's judging listing began, to the second as Last-Modified goes.
      const aliasSince = newestMs !== undefined && (newestMs >= judgedAtMs || sameSecond(newestMs, judgedAtMs));
      if (topKeys.has(parsed.key) || aliasSince) {
        if ((await transport.headObject(parsed.entryName)) === undefined) {
          const restored = decoded === undefined ? 'invalid' : await restoreEntryObject(transport, parsed.entryName, decoded.entryBytes);
          if (restored === 'invalid') {
            // No valid bytes to put back: the intent goes, reported; verify then reports the
            // dangling binding (readers serve the slice raw) and a build stores the tensor again.
            if (decoded !== undefined) outcome.intentsInvalid.push(intent.name);
            outcome.entriesLost.push(parsed.entryName);
          }
          // Refused with the entry still absent: the intent stays for the next resolver.
          if (restored === 'conflict') return void outcome.restoreConflicts.push(parsed.entryName);
          if (restored === 'restored') outcome.restored.push(parsed.entryName);
          else if (restored === 'blob-missing') outcome.blobsMissing.push(parsed.entryName);
        }
      } else if ((await deleteDroppedBlob(transport, parsed.entryName, intent.name, minAgeMs)) === 'deleted') {
        outcome.blobsDeleted.push(blobObjectName(parsed.key, parsed.blobSha256));
      }
      await transport.deleteObject(intent.name);
      outcome.resolved.push(intent.name);
    } catch (error) {
      outcome.error ??= resolutionErrorOf(error);
    }
  });
  for (const list of [outcome.resolved, outcome.restored, outcome.blobsDeleted, outcome.blobsMissing, outcome.intentsInvalid, outcome.restoreConflicts, outcome.entriesLost]) list.sort();
  return outcome;
}
