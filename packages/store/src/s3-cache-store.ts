import { createHash } from 'node:crypto';
import { DEFAULT_CHUNK_SIZE } from '@splitzip/codec';
import { optionNamesOf } from '@splitzip/codec/internal';
import { findDuplicateJsonKey } from '@splitzip/safetensors';
import type { CacheStore } from './cache-store.js';
import { checkBlobDeletable } from './check-blob-deletable.js';
import { checkBlobPayload } from './check-blob-payload.js';
import { checkMoveFrom } from './check-move-from.js';
import { describeValue, detailValue } from './describe-value.js';
import { entryToRepair, storedBlobMatches } from './check-repair-payload.js';
import { callHook } from './call-hook.js';
import { checkCallItems } from './check-call-items.js';
import { checkAliasOptions, checkBooleanOption, checkGcOptions, checkItemFields, checkReadBlobOptions, checkVerifyOptions } from './check-options.js';
import { StoreError, isStoreError, type StoreErrorCode } from './errors.js';
import { MAX_QUALNAME_CHARS, MAX_SLICE_STAMPS } from './limits.js';
import { isValidChunkSize, isValidCoverage } from './manifest-format.js';
import { HostFileStamps, type HostStampWrite } from './host-file-stamps.js';
import { prepareAddEntry } from './prepare-add-entry.js';
import { ReadThroughCache } from './read-through-cache.js';
import { ReadThroughRanges, type RangeIdentity } from './read-through-ranges.js';
import {
  BLOBS_DIR,
  ENTRIES_DIR,
  HEADER_OBJECT,
  MAX_SLICE_EPOCH,
  SLICES_DIR,
  STAMPS_DIR,
  DROPPING_DIR,
  blobObjectName,
  blobSha256Of,
  entryObjectName,
  parseBlobObjectName,
  parseDropIntentObjectName,
  parseEntryObjectName,
  parseSliceObjectName,
  parseStampObjectName,
  sliceDirName,
  sliceObjectName,
  stampDirName,
  stampObjectName,
  encodeShardName,
  topAliasKeys,
} from './s3-layout.js';
import { shardStampKind } from './shard-stamp-kind.js';
import { mapLimited } from './map-limited.js';
import type { HeadedObject, ListedObject, S3Transport } from './s3-transport.js';
import { CLOCK_OFFSET_NOISE_MS, blobMissing, sameSecond, sizeMismatch } from './s3-transport.js';
import { reportTransitDamage } from './transit-damage.js';
import { StateDraft, StoreState, type DroppedBinding } from './store-state.js';
import { deleteListed, removeS3Bindings } from './s3-unbind-slices.js';
import { boundKeysBySlice, compareStampObjects, deriveS3SliceBindings, holdsStampObject, keysWithEntryOrIntent, type S3SliceBindings } from './s3-slice-binding-set.js';
import type { SliceOwner } from './slice-bindings.js';
import { checkUnbindItems, isUnbindable } from './unbind-slices.js';
import { checkDropUnboundOptions, reportDrop } from './drop-unbound-entries.js';
import { dropS3UnboundEntries, findS3UnboundEntries } from './s3-drop-unbound-entries.js';
import { parseS3EntryObject } from './parse-s3-entry-object.js';
import { DROP_INTENT_STALE_MS, resolutionErrorOf, resolveStaleDropIntents, staleDropResolutionOf, type StaleIntentOutcome } from './s3-drop-intents.js';
import { StoreView, resolveAliasKey } from './store-view.js';
import type {
  ReadBlobOptions,
  AddEntryInput,
  AddEntryResult,
  AliasSliceItem,
  AliasSlicesOptions,
  CacheEntry,
  DropUnboundEntriesOptions,
  DropUnboundEntriesReport,
  SliceBinding,
  GcOptions,
  GcKeptYoung,
  GcReport,
  ReadThroughBlobStats,
  StaleDropResolution,
  SliceKeyTuple,
  TensorBytesRef,
  UnbindSliceItem,
  VerifyOptions,
  VerifyProblem,
  VerifyReport,
} from './types.js';
import { entryToDisk, sliceId, validateSliceKey, withSliceKeys, withoutStamps } from './validate-entry.js';
import { verifyEntries } from './verify-entries.js';

/** An entry object holds one entry's JSON (~1 KB; a 4096-character qualname at most). */
export const MAX_ENTRY_OBJECT_BYTES = 64 * 1024 + MAX_QUALNAME_CHARS * 4;
/**
 * A payload of at most this many bytes also travels inline in its entry object (`inline_payload`,
 * base64), which every reader fetches once per process: a load then reads it from memory instead
 * of with a GET of its own. An object store charges a request about the same whatever its size
 * (a 1 KB blob GET cost as much as a 1 MB one on the loopback gateway: ~2 ms of CPU each side), and
 * models carry many tiny tensors (norms, biases): 22 of the default model's 33 cached payloads are
 * under 3 KB. 16 KiB keeps entry objects under 24 KB (MAX_ENTRY_OBJECT_BYTES).
 */
export const S3_INLINE_PAYLOAD_MAX_BYTES = 16 * 1024;
/** Inline payloads a store keeps in memory, at most (a model of tens of thousands of tiny tensors): beyond, their blobs are read. */
export const S3_MAX_INLINE_TOTAL_BYTES = 64 * 1024 * 1024;
/** cache.json holds four small fields. */
const MAX_HEADER_OBJECT_BYTES = 64 * 1024;
/** The layout version in cache.json (the S3 counterpart of MANIFEST_FORMAT). */
export const S3_LAYOUT_FORMAT = 1;
/**
 * The layout version of a cache that may hold several bindings per slice (FILE-BINDINGS.md, "Phase
 * 2: s3://"): written by the first binding added beside another, before its objects, so that a
 * release reading S3_LAYOUT_FORMAT only (0.56 and older) refuses the cache before listing it.
 */
export const S3_LAYOUT_FORMAT_PER_FILE = 2;
/** Orphan blobs and unfinished uploads younger than this may belong to a writer still at work. */
export const DEFAULT_GC_MIN_AGE_MS = 3_600_000;
/**
 * The least `minAgeMs` a gc of an S3 cache takes (below it: INVALID_ARGUMENT). Between a blob's PUT
 * and its entry's PUT a writer's blob is an orphan to gc; that entry PUT ends within the transport's
 * retry bounds, with the default settings 6 attempts (maxAttempts) of at most 300 s each
 * (DEFAULT_REQUEST_DEADLINE_MS) plus under 4 s of backoff: ~30 min. Five more minutes for the wait
 * for a request slot and for skew between gc's clock and the server's Last-Modified. A writer with
 * larger retry settings needs a larger minAgeMs; a writer stopped (SIGSTOP, a suspended host) for
 * longer than this can still lose a blob, which `verify` reports and `build --repair` puts back.
 */
export const MIN_S3_GC_AGE_MS = 35 * 60_000;

/** S3GcOptions' names beyond GcOptions'. */
const S3_GC_EXTRA_OPTIONS = optionNamesOf<Omit<S3GcOptions, keyof GcOptions>>({ allowMinAgeBelowFloorForTests: true });

/** S3DropUnboundEntriesOptions' names beyond DropUnboundEntriesOptions'. */
const S3_DROP_EXTRA_OPTIONS = optionNamesOf<Omit<S3DropUnboundEntriesOptions, keyof DropUnboundEntriesOptions>>({ allowMinAgeBelowFloorForTests: true });

/** DropUnboundEntriesOptions of an S3 store: and for tests a way under MIN_S3_GC_AGE_MS, as gc's. */
export interface S3DropUnboundEntriesOptions extends DropUnboundEntriesOptions {
  /** Tests only, as S3GcOptions': a `minAgeMs` below MIN_S3_GC_AGE_MS. Never for a cache that writers may be using. */
  allowMinAgeBelowFloorForTests?: boolean | undefined;
}

/** GcOptions of an S3 store: GcOptions, and for tests a way under MIN_S3_GC_AGE_MS. */
export interface S3GcOptions extends GcOptions {
  /**
   * Tests only: take a `minAgeMs` below MIN_S3_GC_AGE_MS, for tests that make orphans and collect
   * them at once with no writer at work. Never for a cache that writers may be using.
   */
  allowMinAgeBelowFloorForTests?: boolean | undefined;
}

export interface S3StoreSettings {
  refreshIntervalMs: number | undefined;
  readThroughDir: string | undefined;
  /** OpenCacheStoreOptions.sliceBindingsPerFile: this handle adds an object-stamped binding beside other files' (FILE-BINDINGS.md, phase 2). */
  sliceBindingsPerFile?: boolean | undefined;
}

interface S3Header {
  chunkSize: number;
  coverageMin: number;
  /** S3_LAYOUT_FORMAT, or S3_LAYOUT_FORMAT_PER_FILE once a slice held a second binding. */
  format: number;
}

/** A problem found while listing (an object that fails validation, a conflicting slice): never served, reported by verify. */
interface ListingProblem {
  key: string;
  code: string;
  message: string;
  /** Met reading the object (a reply cut short or garbled on the way looks the same): fetched again at the next refresh. */
  refetch?: boolean;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

function parseHeaderObject(bytes: Uint8Array, path: string): S3Header {
  let json: Record<string, unknown>;
  let text: string;
  try {
    text = decoder.decode(bytes);
    json = JSON.parse(text) as Record<string, unknown>;
  } catch (error) {
    throw new StoreError('MANIFEST_INVALID', `cache.json is not UTF-8 JSON: ${(error as Error).message}`, { path, cause: error });
  }
  // As for manifest.json: JSON.parse keeps the last of two equal keys without a word.
  const duplicate = findDuplicateJsonKey(text);
  if (duplicate) {
    throw new StoreError('MANIFEST_INVALID', `cache.json repeats the key ${describeValue(duplicate.key)}`, {
      path,
      details: { key: detailValue(duplicate.key), keyPath: duplicate.path.slice(0, 8).map(detailValue), offset: duplicate.position },
    });
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new StoreError('MANIFEST_INVALID', 'cache.json must be a JSON object', { path });
  if (json.layout !== 's3-objects' || (json.format !== S3_LAYOUT_FORMAT && json.format !== S3_LAYOUT_FORMAT_PER_FILE)) {
    throw new StoreError(
      'UNSUPPORTED_FORMAT',
      `cache.json layout ${JSON.stringify(json.layout)} format ${JSON.stringify(json.format)} is not s3-objects ${S3_LAYOUT_FORMAT} or ${S3_LAYOUT_FORMAT_PER_FILE}`,
      { path },
    );
  }
  if (!isValidChunkSize(json.chunk_size)) throw new StoreError('MANIFEST_INVALID', 'cache.json chunk_size must be a power of two in 64..65536', { path });
  if (!isValidCoverage(json.coverage_min)) throw new StoreError('MANIFEST_INVALID', 'cache.json coverage_min must be a number in 0..1', { path });
  return { chunkSize: json.chunk_size, coverageMin: json.coverage_min, format: json.format };
}

export function serializeHeaderObject(header: Omit<S3Header, 'format'> & { format?: number }): Uint8Array {
  const format = header.format ?? S3_LAYOUT_FORMAT;
  return encoder.encode(`${JSON.stringify({ layout: 's3-objects', format, chunk_size: header.chunkSize, coverage_min: header.coverageMin })}\n`);
}

/**
 * Creates cache.json with `header`'s settings unless one exists, and returns the bytes that hold:
 * ours, or the existing object's (its settings are the cache's, judged as for any existing cache).
 * A GET's 404 is no proof of absence (a lagging replica, a proxy, a flaky gateway): an unconditional
 * PUT after it rewrote an existing cache's settings. So the PUT is conditional (`If-None-Match: *`:
 * AWS S3 since 2024-08, radosgw, MinIO); refused, the existing object is read, its 404s retried.
 * A server that does not implement the condition (501) gets a second GET (two 404s in a row), then
 * a plain PUT and a read-back: of two creators racing there, the later PUT's settings stay and the
 * other creator reads them back, except where its read-back comes before the later PUT.
 */
async function createHeaderObject(transport: S3Transport, header: Omit<S3Header, 'format'>): Promise<Uint8Array> {
  const bytes = serializeHeaderObject(header);
  const outcome = await transport.putObjectIfAbsent(HEADER_OBJECT, bytes, 'application/json');
  if (outcome === 'created') return bytes;
  if (outcome === 'unsupported') {
    const again = await transport.getSmallObject(HEADER_OBJECT, MAX_HEADER_OBJECT_BYTES);
    if (again) return again;
    await transport.putObject(HEADER_OBJECT, bytes, 'application/json');
  }
  return (await transport.getSmallObject(HEADER_OBJECT, MAX_HEADER_OBJECT_BYTES, { mustExist: true }))!;
}

/**
 * The MD5 hex of a single-part upload's ETag (`"<32 hex>"`), undefined for anything else (no ETag,
 * a multipart upload's `"…-N"`, a server that does not use MD5s): only a plain MD5 names the bytes.
 */
export function plainMd5Etag(etag: string | undefined): string | undefined {
  const match = etag === undefined ? null : /^"?([0-9a-fA-F]{32})"?$/.exec(etag);
  return match ? match[1]!.toLowerCase() : undefined;
}

/** How an alias write that lost a race is settled (S3CacheStore.writeAliases). */
type AliasWriteMode = 'leave' | 'plain' | 'rebind' | 'move' | 'beside';

interface AliasWrite {
  key: string;
  slice: SliceKeyTuple;
  epoch: number;
  mode: AliasWriteMode;
  /** A 'beside' write's object stamp: the write is judged again (mayBindBeside) before a retry. */
  stamp?: string;
  /** A 'beside' write of a conditional item (moveFrom: a loader's record): withdrawn or lost, it answers false, nothing thrown. */
  conditional?: boolean;
}

/**
 * A stamp to record with a binding (an object stamp: one stamp object; a file stamp: a host stamp),
 * and whether this call wrote the binding's alias.
 */
interface StampWrite {
  slice: SliceKeyTuple;
  key: string;
  stamp: string;
  aliasWritten: boolean;
}

/** Stamp objects oldest first: by LastModified, then by name (S3 times have a second's resolution). */
/** Whether an alias object is below its slice's top epoch (`topEpoch`: undefined, none listed). */
function aliasShadowed(alias: { epoch: number }, topEpoch: number | undefined): boolean {
  return topEpoch !== undefined && alias.epoch < topEpoch;
}

/**
 * The stamp objects that name a key below its slice's top alias epoch (a second binding, in format
 * 2; a rebound key's leftover, in format 1), as one digest of their names ('' for none): a set, not
 * a count, since a gc deleting leftovers while a move adds as many kept the count.
 */
function stampsBelowTopDigest(sliceObjects: readonly ListedObject[], stampObjects: readonly ListedObject[]): string {
  if (stampObjects.length === 0) return '';
  const top = topAliasKeys(sliceObjects.map((o) => o.name));
  const hash = createHash('sha1');
  let count = 0;
  for (const object of stampObjects) {
    const parsed = parseStampObjectName(object.name);
    const at = parsed === undefined ? undefined : top.get(sliceId(...parsed.slice));
    if (at === undefined || at.keys.has(parsed!.key)) continue;
    hash.update(object.name).update('\n');
    count++;
  }
  return count === 0 ? '' : hash.digest('hex');
}

/** Writes a rebind makes at most when concurrent rebinds of its slice keep landing at its epoch. */
const REBIND_ATTEMPTS = 6;
/** The longest pause before the n-th rebind attempt is n times this (random below it). */
const REBIND_PAUSE_MS = 50;

/** The listing problem of a slice with several keys at its top epoch (both formats). */
function describeSliceConflict(slice: SliceKeyTuple, keys: readonly string[], epoch: number): ListingProblem {
  return {
    key: keys[0]!,
    code: 'SLICE_CONFLICT',
    message: `slice ${JSON.stringify(slice)} is aliased to ${keys.join(' and ')} at epoch ${epoch}; it resolves to nothing until a rebind`,
  };
}

/**
 * The cache in an S3 bucket below a prefix: every write is an immutable object (content-addressed
 * blob, one object per entry, one per slice alias, one per object stamp of a binding), so writers
 * on many hosts need no lock and no update can be lost. A refresh lists entries/, slices/ and
 * stamps/ and fetches only entry objects it has not seen. File stamps are this host's, kept apart
 * (HostFileStamps). See the README's "S3 layout".
 */
export class S3CacheStore extends StoreView<S3Header> implements CacheStore {
  /** Entry objects fetched so far: name → parsed entry (without slices) or the problem it had. */
  private readonly entryObjects = new Map<string, CacheEntry | ListingProblem>();
  /** The entry object names of the last listing (entryObjects keeps every name ever fetched). */
  private listedEntryObjects = new Set<string>();
  /** Checked inline payloads by entry object name (the blob's bytes: SHA-256 equal to the name's), and their total. */
  private readonly inlinePayloads = new Map<string, Uint8Array>();
  private inlineBytes = 0;
  /** Inline payloads refused (damaged entry objects): never served, reported by verify. */
  private readonly inlineProblems = new Map<string, ListingProblem>();
  /** Entry object chosen per key (the first name seen; later ones of the same key are other encodings). */
  private readonly chosen = new Map<string, string>();
  /** Highest alias epoch seen per slice id (a rebind writes one above it). */
  private sliceEpochs = new Map<string, number>();
  /** Slices with two keys at their highest epoch: unresolved until a rebind. */
  private conflicts = new Map<string, { slice: SliceKeyTuple; keys: string[] }>();
  private problems: ListingProblem[] = [];
  /** The server answered 501 to a conditional PUT: entry objects are PUT plainly from then on. */
  private conditionalPutUnsupported = false;
  /** Stamps attached to bindings in the current view (a change counts as a change of the view). */
  private stampCount = 0;
  /** Bindings in a format-2 view (several per slice may change while slices and stamps count alike). */
  private bindingCount = 0;
  /** stampsBelowTopDigest at this format-1 handle's last look at cache.json (loadListing). */
  private stampsBelowTopLooked = '';
  /** A format-2 view's bindings per slice id, as derived from the last listing (empty in format 1). */
  private bindingSets = new Map<string, S3SliceBindings>();
  /**
   * Slices of a format-2 view with no usable latest binding (a conflict at the top epoch, or the top
   * key's entry not listed, unreadable or of another size) but bindings below it: those, found only
   * by a stamp they hold (lookupSliceBinding with a stamp), never served as the latest.
   */
  private headlessBindings = new Map<string, SliceOwner[]>();
  /** Every stamp object of the last listing, per slice id (recordStamps removes other keys' claims of a stamp it records). */
  private stampObjectsBySlice = new Map<string, { key: string; stamp: string; name: string; lastModifiedMs: number }[]>();
  private changes = 0;
  private readonly readThrough: ReadThroughCache | undefined;
  /** What the read-through directory did for blob reads (readThroughStats). */
  private readonly blobCopies: ReadThroughBlobStats = { hits: 0, misses: 0, damaged: 0, written: 0, writeFailures: 0 };
  /** Entries whose last read was served from this host's read-through copy (at most one per entry). */
  private readonly servedFromCopy = new Set<string>();
  /** Entry objects kept in the read-through directory, as whole-object ranges (`object.<identity sha256>.bin`). */
  private readonly entryCopies: ReadThroughRanges | undefined;
  /** File stamps of this host's shard files (a file stamp describes one host's file: never in the bucket). */
  private readonly hostStamps: HostFileStamps;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private queued: Promise<void> | undefined;

  private constructor(
    private readonly transport: S3Transport,
    private readonly settings: S3StoreSettings,
  ) {
    super({ chunkSize: DEFAULT_CHUNK_SIZE, coverageMin: 0.99, format: S3_LAYOUT_FORMAT });
    this.readThrough = settings.readThroughDir ? new ReadThroughCache(settings.readThroughDir) : undefined;
    this.entryCopies = this.readThrough ? new ReadThroughRanges(this.readThrough, 'object') : undefined;
    this.hostStamps = new HostFileStamps(this.readThrough);
  }

  /** Creates cache.json if asked and missing, then loads everything. */
  static async open(transport: S3Transport, settings: S3StoreSettings, create: { chunkSize: number; coverageMin: number; createBucket: boolean } | undefined): Promise<S3CacheStore> {
    const store = new S3CacheStore(transport, settings);
    const path = transport.describe(HEADER_OBJECT);
    if (create?.createBucket) await transport.ensureBucket();
    let bytes = await transport.getSmallObject(HEADER_OBJECT, MAX_HEADER_OBJECT_BYTES);
    if (!bytes && create) bytes = await createHeaderObject(transport, create);
    if (!bytes) {
      // A missing bucket reads as a missing cache.json: name the bucket instead.
      // (Anything but a clear 404 of the bucket, a 403 of a key without HeadBucket say, keeps the plain message.)
      if (!(await transport.bucketExists().catch(() => true))) {
        throw new StoreError('NOT_A_CACHE', `the bucket ${transport.location.bucket} does not exist at ${transport.endpoint} (a build with create makes the cache; createBucket makes the bucket too)`, {
          path,
          details: { bucket: transport.location.bucket, endpoint: transport.endpoint },
        });
      }
      throw new StoreError('NOT_A_CACHE', 'no cache.json below this prefix (open with create: true to make a new cache)', { path });
    }
    try {
      store.header = parseHeaderObject(bytes, path);
    } catch (error) {
      // A reply cut short or garbled on the way fails the same checks as a damaged object: fetch once
      // more before judging the object (an invalid one fails twice).
      const again = await transport.getSmallObject(HEADER_OBJECT, MAX_HEADER_OBJECT_BYTES);
      if (!again) throw error;
      store.header = parseHeaderObject(again, path);
    }
    await store.refresh();
    if (settings.refreshIntervalMs !== undefined) {
      store.timer = setInterval(() => {
        store.refresh().catch(() => undefined);
      }, settings.refreshIntervalMs);
      store.timer.unref();
    }
    return store;
  }

  get root(): string {
    return this.transport.location.url;
  }

  /** The binding with its object stamps (the bucket's), then this host's file stamps of the slice and its key. */
  override lookupSliceBinding(shardName: string, offsetBytes: number, sizeBytes: number, stamp?: string | null): SliceBinding | undefined {
    const headless = this.headlessBindings.size === 0 ? undefined : this.headlessBindings.get(sliceId(shardName, offsetBytes, sizeBytes));
    if (headless !== undefined) {
      // No usable latest binding (takePerFileView): only a binding holding the reader's stamp, bucket's or this host's.
      this.assertOpen();
      if (typeof stamp !== 'string') return undefined;
      for (const owner of headless) {
        const entry = this.state.entries.get(owner.key);
        const stamps = [...(owner.stamps ?? []), ...this.hostStamps.stampsOf(shardName, offsetBytes, sizeBytes, owner.key)];
        if (entry !== undefined && stamps.includes(stamp)) return { entry, stamps: Object.freeze(stamps) };
      }
      return undefined;
    }
    const several = this.withHostStamps(shardName, offsetBytes, sizeBytes);
    if (several !== undefined) {
      // One binding per file (format 2): the one whose stamps, the bucket's or this host's, hold the reader's, else the latest.
      return (typeof stamp === 'string' ? several.find((binding) => binding.stamps.includes(stamp)) : undefined) ?? several[0];
    }
    const binding = super.lookupSliceBinding(shardName, offsetBytes, sizeBytes);
    if (binding === undefined) return undefined;
    const host = this.hostStamps.stampsOf(shardName, offsetBytes, sizeBytes, binding.entry.key);
    return host.length === 0 ? binding : { entry: binding.entry, stamps: Object.freeze([...binding.stamps, ...host]) };
  }

  /** Every binding of the slice, latest first, each with this host's file stamps of its key. */
  override lookupSliceBindings(shardName: string, offsetBytes: number, sizeBytes: number): SliceBinding[] {
    return this.withHostStamps(shardName, offsetBytes, sizeBytes) ?? super.lookupSliceBindings(shardName, offsetBytes, sizeBytes);
  }

  /** A slice's several bindings (format 2), each with its object stamps then this host's file stamps of its key; undefined for one or none. */
  private withHostStamps(shardName: string, offsetBytes: number, sizeBytes: number): SliceBinding[] | undefined {
    this.assertOpen();
    const owners = this.state.sliceOwners.getOwners(shardName, offsetBytes, sizeBytes);
    if (owners.length <= 1) return undefined;
    const bindings: SliceBinding[] = [];
    for (const owner of owners) {
      const entry = this.state.entries.get(owner.key);
      if (entry === undefined) continue;
      const host = this.hostStamps.stampsOf(shardName, offsetBytes, sizeBytes, owner.key);
      bindings.push({ entry, stamps: Object.freeze([...(owner.stamps ?? []), ...host]) });
    }
    return bindings;
  }

  /** The entry alone: no host-stamp file is read for it. */
  override lookupBySlice(shardName: string, offsetBytes: number, sizeBytes: number): CacheEntry | undefined {
    return super.lookupSliceBinding(shardName, offsetBytes, sizeBytes)?.entry;
  }

  /** S3 caches have no manifest generations: this counts the refreshes that changed what this instance sees. */
  get generation(): number {
    return this.changes;
  }


  /** Reads the blob object of an entry into `target` (exactly compBytes), unchecked. */
  private readObjectInto(entry: CacheEntry, target: Uint8Array): Promise<void> {
    return this.transport.getObjectInto(blobObjectName(entry.key, blobSha256Of(entry)), target, entry.key);
  }

  async checkBlob(key: string): Promise<void> {
    const entry = this.entryToRead(key);
    const inlineName = this.chosen.get(entry.key);
    const inline = inlineName === undefined ? undefined : this.inlinePayloads.get(inlineName);
    if (inline !== undefined && inline.length === entry.compBytes) return;
    // A read-through copy serves the read (checked then) even with the object gone, as readBlob does.
    if (this.readThrough && (await this.readThrough.hasBlob(entry.key, blobSha256Of(entry), entry.compBytes).catch(() => false))) return;
    const name = blobObjectName(entry.key, blobSha256Of(entry));
    const head = await this.transport.headObject(name);
    if (head === undefined) throw blobMissing(this.transport.describe(name), key);
    // A reply without Content-Length confirms the object is there, not its size: the read checks that.
    if (head.sizeKnown && head.sizeBytes !== entry.compBytes) throw sizeMismatch(this.transport.describe(name), key, head.sizeBytes, entry.compBytes);
  }

  async readBlob(key: string, stagingSlot: Uint8Array, options: ReadBlobOptions = {}): Promise<Uint8Array> {
    checkReadBlobOptions(options, 'readBlob');
    const { entry, view } = this.prepareBlobRead(key, stagingSlot);
    // verifyChecksum: false is the caller's promise to verify while decoding and to call
    // discardLocalCopy on a mismatch: one pass over the payload instead of two.
    const checksum = options.verifyChecksum !== false;
    const name = this.chosen.get(entry.key);
    const inline = name === undefined ? undefined : this.inlinePayloads.get(name);
    if (inline !== undefined && inline.length === entry.compBytes) {
      // Checked whole (SHA-256 of the blob, header, checksum) when its entry object was read, and
      // private to this store since: copied out as it is.
      view.set(inline);
      return view;
    }
    if (this.readThrough) {
      let hit = false;
      try {
        hit = await this.readThrough.readInto(entry.key, blobSha256Of(entry), view);
      } catch {
        hit = false; // An unreadable local copy is a miss.
      }
      if (hit) {
        try {
          checkBlobPayload(entry, view, { checksum });
          this.blobCopies.hits++;
          this.servedFromCopy.add(entry.key);
          return view;
        } catch {
          this.blobCopies.damaged++;
          await this.readThrough.remove(entry.key, blobSha256Of(entry)); // Damaged on this host's disk: fetch again.
        }
      } else {
        this.blobCopies.misses++;
      }
    }
    this.servedFromCopy.delete(entry.key);
    await this.readObjectInto(entry, view);
    try {
      checkBlobPayload(entry, view, { checksum });
    } catch (error) {
      // Damaged on the way or at rest: one read cannot tell, a second can. Fetched again intact, the
      // first body was damaged in transit, and raw ranges fetched from this endpoint in this process
      // are not kept (reportTransitDamage: openS3ObjectSource); damaged again, the object itself is,
      // which says nothing of the endpoint (every load touching it distrusted every model source on
      // it before). An intact payload of another tensor (META_MISMATCH) is no damage of either kind.
      const path = this.transport.describe(blobObjectName(entry.key, blobSha256Of(entry)));
      if (isStoreError(error, 'META_MISMATCH')) throw error.withContext({ path });
      await this.readObjectInto(entry, view);
      try {
        checkBlobPayload(entry, view, { checksum });
      } catch (again) {
        throw isStoreError(again) ? again.withContext({ path }) : again;
      }
      reportTransitDamage(this.transport.endpoint);
    }
    if (this.readThrough) {
      // The local copy is an optimisation: a full disk must not fail the read. Unchecked here when
      // the caller verifies: a damaged copy is then dropped through discardLocalCopy, and a reader
      // that leaves the checksum to this store judges every copy it reads.
      await this.readThrough.write(entry.key, blobSha256Of(entry), view).then(
        () => void this.blobCopies.written++,
        () => void this.blobCopies.writeFailures++, // counted, for readThroughStats: the read goes on
      );
    }
    return view;
  }

  /** Counts of this store's blob reads through its read-through directory; undefined without one. */
  readThroughStats(): ReadThroughBlobStats | undefined {
    return this.readThrough ? { ...this.blobCopies } : undefined;
  }

  async repairBlob(key: string, payload: Uint8Array): Promise<boolean> {
    this.assertOpen();
    await this.refresh();
    const entry = entryToRepair(this.state.entries, key, payload, this.root);
    // The object itself, not an inline or read-through copy: that is what a repair rewrites.
    if (await storedBlobMatches(entry, payload, (view) => this.readObjectInto(entry, view))) return false;
    // One PUT replaces the object whole; readers see the old bytes or the new.
    await this.transport.putObject(blobObjectName(entry.key, blobSha256Of(entry)), payload);
    await this.readThrough?.remove(entry.key, blobSha256Of(entry));
    return true;
  }

  /**
   * Drops this host's read-through copy of an entry's blob (a caller that read it with
   * verifyChecksum: false found its checksum wrong): the next read fetches the object again.
   */
  async discardLocalCopy(key: string): Promise<void> {
    this.assertOpen();
    const entry = this.state.entries.get(key);
    if (!entry || !this.readThrough) return;
    this.blobCopies.damaged++; // found by the caller's checksum: its read was counted a hit
    // A fetched body the caller found damaged came that way; a copy of this host's disk blames itself alone.
    if (!this.servedFromCopy.delete(entry.key)) reportTransitDamage(this.transport.endpoint);
    await this.readThrough.remove(entry.key, blobSha256Of(entry));
  }

  /**
   * Lists entries/, slices/ and stamps/ and rebuilds the view (fetching only new entry objects). Callers
   * arriving while one refresh runs share the next one, which starts after theirs was asked for.
   */
  refresh(): Promise<void> {
    this.assertOpen();
    // Host stamps are read again at the next lookup: other processes of this host may have added some.
    this.hostStamps.forgetLoaded();
    if (this.queued) return this.queued;
    const previous = this.running ?? Promise.resolve();
    const next: Promise<void> = previous
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        this.running = next;
        return this.loadListing();
      })
      .finally(() => {
        if (this.running === next) this.running = undefined;
      });
    this.queued = next;
    return next;
  }

  /**
   * cache.json's format as this handle knows it: S3_LAYOUT_FORMAT (1, one binding per slice) or
   * S3_LAYOUT_FORMAT_PER_FILE (2, bindings side by side). Read at open, and again whenever a listing
   * shows a key bound below its slice's top epoch (loadListing) or a write judges it (readFormatAgain):
   * a move to 2 is never undone, so 2 stays 2 after every unbind or gc. What a loader gates binding
   * beside on (besideOnlyIfSeveral), where holdsSeveralBindings says only what the view holds now.
   */
  get layoutFormat(): number {
    return this.header.format ?? S3_LAYOUT_FORMAT;
  }

  private async loadListing(): Promise<void> {
    const [entryObjects, sliceObjects, stampObjects] = await Promise.all([this.transport.list(ENTRIES_DIR), this.transport.list(SLICES_DIR), this.transport.list(STAMPS_DIR)]);
    // A format-1 view with a stamp object of a key below its slice's top epoch: another handle may
    // have moved the cache to format 2 (a binding beside another), so cache.json is read again.
    // Only when their set changed since the last look: a rebound slice's leftover stamps (until gc)
    // would cost every refresh a GET; a move to format 2 always adds one (the old latest's), so the
    // set changes even where a gc removed as many leftovers meanwhile (their count did not).
    if (this.header.format !== S3_LAYOUT_FORMAT_PER_FILE) {
      const below = stampsBelowTopDigest(sliceObjects, stampObjects);
      if (below !== '' && below !== this.stampsBelowTopLooked) {
        this.stampsBelowTopLooked = below;
        await this.readFormatAgain(false);
      }
    }
    // New objects, and those whose read failed: one bad reply must not hide an entry for the store's lifetime.
    const fresh = entryObjects.filter((o) => {
      const known = this.entryObjects.get(o.name);
      return known === undefined || (!('blob' in known) && known.refetch === true);
    });
    await mapLimited(fresh, this.transport.settings.maxConcurrentRequests, async (object) => {
      this.entryObjects.set(object.name, await this.fetchEntryObject(object));
    });
    // From here on everything is synchronous: readers never see a half-built view.
    const listed = new Set(entryObjects.map((o) => o.name));
    this.listedEntryObjects = listed;
    const problems: ListingProblem[] = [];
    const entries = new Map<string, CacheEntry>();
    for (const [key, name] of [...this.chosen]) {
      if (!listed.has(name)) this.chosen.delete(key); // Deleted by hand: forget it.
    }
    for (const [name, bytes] of [...this.inlinePayloads]) {
      if (listed.has(name)) continue;
      this.inlinePayloads.delete(name);
      this.inlineBytes -= bytes.length;
    }
    for (const [name, problem] of this.inlineProblems) if (listed.has(name)) problems.push(problem);
    for (const object of entryObjects) {
      const parsed = this.entryObjects.get(object.name);
      if (!parsed) continue;
      if (!('blob' in parsed)) {
        problems.push(parsed);
        continue;
      }
      if (!this.chosen.has(parsed.key)) this.chosen.set(parsed.key, object.name);
      if (this.chosen.get(parsed.key) === object.name) entries.set(parsed.key, parsed);
    }
    // Aliases: per slice, the keys at its highest epoch; one key binds, two are a conflict.
    for (const object of sliceObjects) {
      if (!parseSliceObjectName(object.name)) problems.push({ key: '', code: 'ENTRY_INVALID', message: `unrecognised object ${this.transport.describe(object.name)} below slices/` });
    }
    const top = topAliasKeys(sliceObjects.map((o) => o.name));
    // Object stamps per slice; those of a key the slice is not bound to are ignored.
    const stampObjectsBySlice = new Map<string, { key: string; stamp: string; name: string; lastModifiedMs: number }[]>();
    for (const object of stampObjects) {
      const parsed = parseStampObjectName(object.name);
      if (!parsed) {
        problems.push({ key: '', code: 'ENTRY_INVALID', message: `unrecognised object ${this.transport.describe(object.name)} below stamps/` });
        continue;
      }
      const id = sliceId(...parsed.slice);
      let list = stampObjectsBySlice.get(id);
      if (!list) stampObjectsBySlice.set(id, (list = []));
      list.push({ key: parsed.key, stamp: parsed.stamp, name: object.name, lastModifiedMs: object.lastModifiedMs });
    }
    this.stampObjectsBySlice = stampObjectsBySlice;
    if (this.header.format === S3_LAYOUT_FORMAT_PER_FILE) {
      this.takePerFileView(entries, sliceObjects, stampObjects, problems);
      return;
    }
    let stampCount = 0;
    const sliceLists = new Map<string, SliceKeyTuple[]>();
    const epochs = new Map<string, number>();
    const conflicts = new Map<string, { slice: SliceKeyTuple; keys: string[] }>();
    for (const [id, { slice, epoch, keys }] of top) {
      epochs.set(id, epoch);
      if (keys.size > 1) {
        const list = [...keys].sort();
        conflicts.set(id, { slice, keys: list });
        problems.push(describeSliceConflict(slice, list, epoch));
        continue;
      }
      const key = [...keys][0]!;
      const entry = entries.get(key);
      if (!entry) continue; // Its entry object is not listed yet (written just before): next refresh.
      if (entry.rawBytes !== slice[2]) {
        problems.push({ key, code: 'SLICE_SIZE_MISMATCH', message: `slice ${JSON.stringify(slice)} has ${slice[2]} bytes but the entry holds ${entry.rawBytes}` });
        continue;
      }
      let list = sliceLists.get(key);
      if (!list) sliceLists.set(key, (list = []));
      // Oldest first (then by name: S3 times have a second's resolution), the latest MAX_SLICE_STAMPS
      // kept, as the local store's merge keeps the latest.
      const stamps = (stampObjectsBySlice.get(id) ?? [])
        .filter((s) => s.key === key)
        .sort(compareStampObjects)
        .slice(-MAX_SLICE_STAMPS)
        .map((s) => s.stamp);
      stampCount += stamps.length;
      list.push(stamps.length === 0 ? slice : Object.freeze([slice[0], slice[1], slice[2], Object.freeze(stamps)] as const));
    }
    const withSlices = [...entries.values()].map((entry) => {
      const list = sliceLists.get(entry.key);
      return list ? withSliceKeys(entry, list) : entry;
    });
    const state = StoreState.fromEntries(withSlices, { source: 'S3 listing', path: this.root });
    this.takeView({ state, stampCount, bindingCount: this.bindingCount, epochs, conflicts, problems });
  }

  /** The end of loadListing, both formats: the new view taken, and `changes` counted when it differs. */
  private takeView(view: { state: StoreState; stampCount: number; bindingCount: number; epochs: Map<string, number>; conflicts: Map<string, { slice: SliceKeyTuple; keys: string[] }>; problems: ListingProblem[] }): void {
    const changed =
      view.state.entries.size !== this.state.entries.size ||
      view.state.sliceOwners.size !== this.state.sliceOwners.size ||
      view.bindingCount !== this.bindingCount ||
      view.problems.length !== this.problems.length ||
      view.stampCount !== this.stampCount;
    this.state = view.state;
    this.stampCount = view.stampCount;
    this.bindingCount = view.bindingCount;
    this.sliceEpochs = view.epochs;
    this.conflicts = view.conflicts;
    this.problems = view.problems;
    if (changed) this.changes++;
  }

  /**
   * loadListing's view of a format-2 cache (S3_LAYOUT_FORMAT_PER_FILE): each slice's bindings by
   * deriveS3SliceBindings, the primary (the top epoch's key) first, then file bindings by epoch;
   * a top-epoch conflict as in format 1 (no primary, reported). Synchronous, as loadListing's end.
   */
  private takePerFileView(entries: Map<string, CacheEntry>, sliceObjects: readonly ListedObject[], stampObjects: readonly ListedObject[], problems: ListingProblem[]): void {
    // What binds: a key with a listed entry object, readable or not (as gc and the drop judge, so
    // that all cut at MAX_SLICE_BINDINGS alike); one not readable or of another size counts toward
    // the limit and is not served (below).
    const withObject = keysWithEntryOrIntent([...this.listedEntryObjects].map((name) => ({ name, lastModifiedMs: 0 })));
    const sets = deriveS3SliceBindings(sliceObjects, stampObjects, (key) => withObject.has(key));
    const state = new StoreState();
    const sliceLists = new Map<string, SliceKeyTuple[]>();
    const epochs = new Map<string, number>();
    const conflicts = new Map<string, { slice: SliceKeyTuple; keys: string[] }>();
    let stampCount = 0;
    let bindingCount = 0;
    const headlessBindings = new Map<string, SliceOwner[]>();
    for (const [id, set] of sets) {
      const { slice, topEpoch, conflictKeys } = set;
      epochs.set(id, topEpoch);
      if (conflictKeys) {
        conflicts.set(id, { slice, keys: conflictKeys });
        problems.push(describeSliceConflict(slice, conflictKeys, topEpoch));
      }
      const owners: SliceOwner[] = [];
      for (const binding of set.bindings) {
        const entry = entries.get(binding.key);
        if (!entry) continue; // The primary's entry object is not listed yet (written just before): next refresh.
        if (entry.rawBytes !== slice[2]) {
          problems.push({ key: binding.key, code: 'SLICE_SIZE_MISMATCH', message: `slice ${JSON.stringify(slice)} has ${slice[2]} bytes but the entry holds ${entry.rawBytes}` });
          continue;
        }
        const stamps = Object.freeze([...binding.stamps]);
        stampCount += stamps.length;
        owners.push({ key: binding.key, stamps: stamps.length === 0 ? undefined : stamps });
        if (conflictKeys !== undefined || owners[0]!.key !== set.bindings[0]!.key) continue; // headless (below): not bound in the view
        let list = sliceLists.get(binding.key);
        if (!list) sliceLists.set(binding.key, (list = []));
        list.push(stamps.length === 0 ? slice : Object.freeze([slice[0], slice[1], slice[2], stamps] as const));
      }
      bindingCount += owners.length;
      // No usable latest binding: a stampless lookup misses, as in format 1; the lower ones are found by their stamps only.
      const headless = conflictKeys !== undefined || owners[0]?.key !== set.bindings[0]?.key;
      if (headless && owners.length > 0) headlessBindings.set(id, owners);
      else if (owners.length > 0) state.sliceOwners.setOwners(slice[0], slice[1], slice[2], owners);
    }
    for (const entry of entries.values()) {
      const list = sliceLists.get(entry.key);
      state.entries.set(entry.key, list ? withSliceKeys(entry, list) : entry);
    }
    this.bindingSets = sets;
    this.headlessBindings = headlessBindings;
    this.takeView({ state, stampCount, bindingCount, epochs, conflicts, problems });
  }

  /**
   * An entry object's bytes: this host's read-through copy of the listed version (kept as a
   * read-through range of the whole object: its file carries its identity, ETag included, and its
   * content digest), else a GET, kept when it is the listed version (its MD5 equals a plain-MD5
   * ETag). Entry objects never change, so a host that loaded a cache once reads them without a
   * request each.
   */
  private async readEntryObjectBytes(object: ListedObject, entryKey: string, path: string, fetched: { fromServer: boolean }): Promise<Uint8Array> {
    const md5 = this.entryCopies ? plainMd5Etag(object.etag) : undefined;
    const identity: RangeIdentity | undefined =
      md5 !== undefined && object.sizeBytes > 0 && object.sizeBytes <= MAX_ENTRY_OBJECT_BYTES
        ? { bucket: this.transport.location.bucket, key: `${this.transport.location.prefix}${object.name}`, etag: object.etag!, sizeBytes: object.sizeBytes, offsetBytes: 0, lengthBytes: object.sizeBytes }
        : undefined;
    if (identity !== undefined) {
      const local = new Uint8Array(identity.lengthBytes);
      if (await this.entryCopies!.readInto(identity, local)) return local;
    }
    fetched.fromServer = true;
    const bytes = await this.transport.getSmallObject(object.name, MAX_ENTRY_OBJECT_BYTES);
    if (!bytes) throw new StoreError('ENTRY_INVALID', 'the entry object vanished between listing and reading', { entry: entryKey, path });
    if (identity !== undefined && bytes.length === identity.lengthBytes && createHash('md5').update(bytes).digest('hex') === md5) {
      await this.entryCopies!.keep(identity, bytes); // never rejects: a failed write is only a miss later
    }
    return bytes;
  }

  /**
   * An entry object parsed, or the problem it has. A reply cut short or garbled on the way fails the
   * same checks as a damaged object, so one that fails is fetched once more before it is judged (a
   * damaged object fails twice): one bad reply failed a whole build's alias check.
   */
  private async fetchEntryObject(object: ListedObject): Promise<CacheEntry | ListingProblem> {
    const first = await this.fetchEntryObjectOnce(object);
    if ('blob' in first || !first.fromServer) return first;
    return this.fetchEntryObjectOnce(object);
  }

  private async fetchEntryObjectOnce(object: ListedObject): Promise<CacheEntry | (ListingProblem & { fromServer?: boolean })> {
    const name = object.name;
    const parsedName = parseEntryObjectName(name);
    const path = this.transport.describe(name);
    if (!parsedName) return { key: '', code: 'ENTRY_INVALID', message: `unrecognised object ${path} below entries/` };
    const fetched = { fromServer: false };
    try {
      const bytes = await this.readEntryObjectBytes(object, parsedName.key, path, fetched);
      const { entry, json } = parseS3EntryObject(name, bytes, path);
      this.takeInlinePayload(name, entry, json.inline_payload, path);
      return entry;
    } catch (error) {
      // An unavailable server must fail the refresh (and be retried), not mark the entry bad forever.
      if (isStoreError(error) && (error.retryable || error.code === 'S3_ERROR')) throw error;
      const e = isStoreError(error) ? error.withContext({ path }) : new StoreError('ENTRY_INVALID', String(error), { entry: parsedName.key, path });
      return { key: parsedName.key, code: e.code, message: e.message, refetch: true, fromServer: fetched.fromServer };
    }
  }

  /**
   * Keeps an entry object's inline payload when it is the blob's bytes (its length is comp_bytes,
   * its SHA-256 the one in the object's name, its header and checksum agree with the entry). A
   * damaged one is never served (the blob is read instead) and is reported by verify.
   */
  private takeInlinePayload(name: string, entry: CacheEntry, value: unknown, path: string): void {
    if (value === undefined) return;
    const refuse = (why: string) => {
      this.inlineProblems.set(name, { key: entry.key, code: 'ENTRY_INVALID', message: `${path}: inline_payload ${why}; the blob object is read instead` });
    };
    // Base64 of S3_INLINE_PAYLOAD_MAX_BYTES, checked before decoding anything.
    if (typeof value !== 'string' || value.length > 4 * Math.ceil(S3_INLINE_PAYLOAD_MAX_BYTES / 3)) return refuse('is not a base64 string of at most S3_INLINE_PAYLOAD_MAX_BYTES');
    const bytes = new Uint8Array(Buffer.from(value, 'base64'));
    if (bytes.length !== entry.compBytes) return refuse(`holds ${bytes.length} bytes, comp_bytes is ${entry.compBytes}`);
    if (createHash('sha256').update(bytes).digest('hex') !== entry.blobSha256) return refuse('differs from the blob (SHA-256)');
    try {
      checkBlobPayload(entry, bytes);
    } catch (error) {
      return refuse(`fails the payload checks: ${(error as Error).message}`);
    }
    if (this.inlineBytes + bytes.length > S3_MAX_INLINE_TOTAL_BYTES) return; // Memory bound: its blob is read.
    this.inlinePayloads.set(name, bytes);
    this.inlineBytes += bytes.length;
  }

  // ---- writing ------------------------------------------------------------------------------

  addEntry(input: AddEntryInput): Promise<AddEntryResult> {
    return this.addEntries([input]).then((results) => results[0]!);
  }

  async addEntries(inputs: readonly AddEntryInput[]): Promise<AddEntryResult[]> {
    this.assertOpen();
    checkCallItems(inputs, 'addEntries', 'an AddEntryInput object');
    // Slice keys are planned without stamps (alias objects carry none); once the slice is bound,
    // their object stamps are recorded as stamp objects, their file stamps as host stamps.
    const stampsOf = new Map<string, readonly string[]>();
    const prepared = inputs.map((input) => {
      const item = prepareAddEntry(input, { requireBlobSha256: true });
      for (const slice of item.entry.sliceKeys) {
        encodeShardName(slice[0]);
        const stamps = slice[3] ?? [];
        if (stamps.length === 0) continue;
        // Checked before anything is written: a stamp whose object key would not fit is INVALID_ARGUMENT.
        for (const stamp of stamps) if (shardStampKind(stamp) === 'object') stampObjectName(slice, item.entry.key, stamp, this.transport.location.prefix);
        stampsOf.set(`${item.entry.key}/${sliceId(...slice)}`, stamps);
      }
      return item.entry.sliceKeys.some((s) => s[3] !== undefined) ? { ...item, entry: withSliceKeys(item.entry, item.entry.sliceKeys.map(withoutStamps)) } : item;
    });
    const stampWrites: StampWrite[] = [];
    const wantStamps = (key: string, slice: SliceKeyTuple, aliasWritten: boolean): void => {
      for (const stamp of stampsOf.get(`${key}/${sliceId(...slice)}`) ?? []) stampWrites.push({ slice, key, stamp, aliasWritten });
    };
    await this.refresh();
    const draft = new StateDraft(this.state);
    const context = { source: 'this call', path: this.root };
    const fresh: typeof prepared = [];
    let aliasWrites: (AliasWrite & { at: number })[] = [];
    /** Stamps of slices a new entry binds beside other objects' bindings (sliceBindingsPerFile): PUT before their aliases. */
    const besideStamps: { slice: SliceKeyTuple; key: string; stamp: string }[] = [];
    for (const [at, item] of prepared.entries()) {
      // A leaveTakenSlices input's slice that another writer binds meanwhile is left out here too.
      const mode: AliasWriteMode = inputs[at]?.leaveTakenSlices === true ? 'leave' : 'plain';
      let { entry } = item;
      const existing = draft.getEntry(entry.key);
      if (!existing) {
        // Bound to other objects' entries, each with an object stamp (FILE-BINDINGS.md, phase 2):
        // beside them, as aliasSlices binds; the other slices go on as with one binding.
        const beside = entry.sliceKeys.filter((slice) => {
          const stamp = (stampsOf.get(`${entry.key}/${sliceId(...slice)}`) ?? []).find((s) => shardStampKind(s) === 'object');
          if (!this.mayBindBeside(slice, entry.key, stamp, entry.rawBytes) || this.sliceEpochs.get(sliceId(...slice))! + 1 > MAX_SLICE_EPOCH) return false;
          besideStamps.push({ slice, key: entry.key, stamp: stamp! });
          aliasWrites.push({ key: entry.key, slice, epoch: this.sliceEpochs.get(sliceId(...slice))! + 1, mode: 'beside', stamp: stamp!, at });
          wantStamps(entry.key, slice, true);
          return true;
        });
        if (beside.length > 0) entry = withSliceKeys(entry, entry.sliceKeys.filter((slice) => !beside.includes(slice)));
        // leaveTakenSlices: a slice another writer bound meanwhile is left out, not a conflict.
        // A slice with no usable latest binding (format 2) whose top key is another: taken, as a conflict is.
        const headlessTop = (slice: SliceKeyTuple): boolean => {
          const id = sliceId(...slice);
          return this.headlessBindings.has(id) && !this.conflicts.has(id) && this.bindingSets.get(id)?.bindings[0]?.key !== entry.key;
        };
        const taken = (slice: SliceKeyTuple): boolean => {
          const owner = draft.ownerOf(slice);
          return (owner !== undefined && owner !== entry.key) || this.conflicts.has(sliceId(...slice)) || headlessTop(slice);
        };
        const slices = inputs[at]?.leaveTakenSlices === true ? entry.sliceKeys.filter((slice) => !taken(slice)) : entry.sliceKeys;
        for (const slice of slices) this.assertNoConflict(slice, entry.key);
        for (const slice of slices) if (headlessTop(slice)) throw this.headlessTopError(slice, entry.key);
        draft.planAdd(withSliceKeys(entry, []), context);
        for (const slice of slices) {
          // planAdd without slices, then each slice: conflicts are thrown here, before anything is written.
          if (draft.planAlias(entry.key, slice, false, context) === 'bound') aliasWrites.push({ key: entry.key, slice, epoch: 0, mode, at });
          wantStamps(entry.key, slice, true);
        }
        fresh.push(item);
      } else {
        // An existing key (a rerun after a crash between the entry and its aliases): bind what is
        // still unbound; a slice bound elsewhere stays as it is, as re-adding is a no-op.
        for (const slice of entry.sliceKeys) {
          const headless = this.headlessBindings.get(sliceId(...slice));
          if (headless !== undefined) {
            // No usable latest binding (format 2): bound elsewhere as far as a re-add goes. A lower
            // binding of this key only records its stamps: an alias written at epoch 0 lost to the
            // top and was deleted, its own lower alias with it (the binding lost).
            if (headless.some((owner) => owner.key === entry.key)) wantStamps(entry.key, slice, false);
            continue;
          }
          // Bound to this key already: only its stamps may be new.
          if (draft.ownerOf(slice) === entry.key) wantStamps(entry.key, slice, false);
          if (draft.ownerOf(slice) !== undefined || this.conflicts.has(sliceId(...slice))) continue;
          if (draft.planAlias(entry.key, slice, false, context) === 'bound') aliasWrites.push({ key: entry.key, slice, epoch: 0, mode, at });
          wantStamps(entry.key, slice, true);
        }
      }
    }
    const added = new Set(fresh.map((f) => f.entry.key));
    const limit = this.transport.settings.maxConcurrentRequests;
    // Entry objects another writer created since this call's listing (the same key and blob: the same name).
    const foundExisting: { key: string; name: string; body: Uint8Array }[] = [];
    // Blob first, then the entry object: a listed entry always has its complete blob.
    await mapLimited(fresh, limit, async ({ entry, payload, onPayloadWritten }) => {
      await this.transport.putObject(blobObjectName(entry.key, blobSha256Of(entry)), payload);
      const json = {
        ...entryToDisk(entry),
        slice_keys: [],
        ...(payload.length <= S3_INLINE_PAYLOAD_MAX_BYTES ? { inline_payload: Buffer.from(payload.buffer, payload.byteOffset, payload.length).toString('base64') } : {}),
      };
      // The blob is stored and its inline copy made: the payload is not read again.
      if (onPayloadWritten) callHook(onPayloadWritten);
      const name = entryObjectName(entry.key, blobSha256Of(entry));
      const body = encoder.encode(`${JSON.stringify(json)}\n`);
      if (await this.putEntryObjectIfAbsent(name, body)) return;
      foundExisting.push({ key: entry.key, name, body });
    });
    if (foundExisting.length > 0) {
      aliasWrites = await this.settleExistingEntryObjects(foundExisting, added, aliasWrites);
    }
    // Only slices of entries still written by this call: a re-add's settle left out its beside writes.
    const besideNow = besideStamps.filter((w) => aliasWrites.some((a) => a.mode === 'beside' && a.key === w.key && a.slice === w.slice));
    if (besideNow.length > 0) await this.prepareBeside(besideNow);
    // writeAliases refreshes (to check its aliases won); otherwise refresh so that this instance sees its own entries.
    const bound = aliasWrites.length > 0 ? await this.settleThenRecordStamps(this.writeAliases(aliasWrites), stampWrites) : [];
    if (aliasWrites.length === 0 && fresh.length > 0) await this.refresh();
    if (aliasWrites.length === 0) await this.recordStamps(stampWrites);
    const slicesBound = prepared.map(() => 0);
    aliasWrites.forEach((write, i) => {
      if (bound[i]) slicesBound[write.at] = (slicesBound[write.at] ?? 0) + 1;
    });
    const droppedBindings = prepared.map((): DroppedBinding[] => []);
    // Bound beside: the stamp is the new entry's now, other keys' claims of it go (One stamp, one key).
    const confirmed = besideNow.filter((b) => aliasWrites.some((w, i) => w.mode === 'beside' && bound[i] === true && w.slice === b.slice && w.key === b.key));
    if (confirmed.length > 0) await this.deleteOtherClaims(confirmed);
    if (besideNow.length > 0) {
      await this.evictPastLimit(
        besideNow.map((w) => w.slice),
        (slice, key) => {
          for (const write of aliasWrites) if (write.mode === 'beside' && sliceId(...write.slice) === sliceId(...slice)) droppedBindings[write.at]!.push({ slice, key });
        },
      );
    }
    return prepared.map(({ entry }, at) => ({
      key: entry.key,
      added: added.has(entry.key),
      slicesBound: slicesBound[at] ?? 0,
      ...(droppedBindings[at]!.length > 0 ? { droppedBindings: droppedBindings[at] } : {}),
    }));
  }

  /**
   * PUTs a new entry object only where none of its name exists (`If-None-Match: *`): true when this
   * call created it, false when one was there (another writer of the same key and blob since this
   * call's listing: it counts the entry as added, this call does not). A server without the
   * condition (501) gets a plain PUT, as before 2026-12-07 (two racing writers may then both count it).
   */
  private async putEntryObjectIfAbsent(name: string, body: Uint8Array): Promise<boolean> {
    if (!this.conditionalPutUnsupported) {
      const outcome = await this.transport.putObjectIfAbsent(name, body, 'application/json');
      if (outcome !== 'unsupported') return outcome === 'created';
      this.conditionalPutUnsupported = true;
    }
    await this.transport.putObject(name, body, 'application/json');
    return true;
  }

  /**
   * Entry objects refused as existing, judged on a new listing: a valid one (its key and blob are
   * in its name, which fetchEntryObject checks) makes this call a re-add of an existing key (not
   * added; its alias writes only for slices still unbound, as for a key found at the listing). One
   * this version cannot read (damaged, or a layout it refuses) is replaced by a plain PUT, as before
   * the condition (a writer repairs it, counted as added); one not listed (a 409 of a conditional
   * write that then failed) is PUT conditionally once more. Returns the alias writes left.
   */
  private async settleExistingEntryObjects<W extends AliasWrite>(found: readonly { key: string; name: string; body: Uint8Array }[], added: Set<string>, aliasWrites: W[]): Promise<W[]> {
    await this.refresh();
    const existing = new Set<string>();
    let replaced = false;
    await mapLimited(found, this.transport.settings.maxConcurrentRequests, async ({ key, name, body }) => {
      const listed = this.listedEntryObjects.has(name) ? this.entryObjects.get(name) : undefined;
      if (listed !== undefined && 'blob' in listed) {
        added.delete(key);
        existing.add(key);
      } else if (listed !== undefined) {
        await this.transport.putObject(name, body, 'application/json');
        replaced = true;
      } else if (await this.putEntryObjectIfAbsent(name, body)) {
        replaced = true;
      } else {
        added.delete(key);
        existing.add(key);
      }
    });
    if (replaced) await this.refresh();
    // As for a key found at the listing: a slice bound already (to this key by the other writer, or
    // to another) or in conflict is left as it is.
    return aliasWrites.filter((w) => !existing.has(w.key) || (this.state.ownerOf(w.slice) === undefined && !this.conflicts.has(sliceId(...w.slice))));
  }

  private assertNoConflict(slice: SliceKeyTuple, key: string): void {
    const conflict = this.conflicts.get(sliceId(...slice));
    if (conflict) {
      throw new StoreError('SLICE_CONFLICT', `slice ${JSON.stringify(slice)} is aliased to ${conflict.keys.join(' and ')}; refusing to bind it to ${key} (rebind to settle it)`, {
        entry: key,
        path: this.root,
        details: { slice, boundKeys: conflict.keys, requestedKey: key },
      });
    }
  }

  /**
   * Writes alias objects, refreshes, and checks that each slice now resolves to its key (a racing
   * writer may have bound it elsewhere). Resolves with, per write, whether its slice is bound to
   * its key. A write that lost deletes its own alias object (the name is this (slice, epoch, key)'s,
   * never another key's), so a loser never leaves a conflict behind nor undoes a binding another
   * writer reported; then by its mode:
   * - `leave` (addEntries with leaveTakenSlices, or a re-add): false, nothing thrown;
   * - `move` (aliasSlices items with `moveFrom`): false, nothing thrown, never tried again, also
   *   when another key was written above it: another writer's binding wins over a conditional one;
   * - `plain`: SLICE_CONFLICT, thrown once every write of the call has been settled;
   * - any mode whose entry object is gone after the PUT (dropUnboundEntries since this call's
   *   listing): its alias object goes too, and false, nothing thrown, as a local store answers;
   * - `rebind`: a same-epoch race with another key is tried again at the top epoch + 1 after a
   *   random pause (up to REBIND_ATTEMPTS writes), so that of two concurrent rebinds one wins and
   *   the other counts as moved first, then overridden (last writer wins); a rebind above ours is
   *   such an override too (true). Still racing after the last attempt: SLICE_CONFLICT.
   * - `beside`: tried again as a rebind is; withdrawn where it would shadow a binding without an
   *   object stamp, or still racing after the last attempt: SLICE_CONFLICT, but false, nothing
   *   thrown, for a conditional item's (`conditional`: a loader's record, as a lost `move`).
   */
  private async writeAliases(writes: readonly AliasWrite[]): Promise<boolean[]> {
    const results = writes.map(() => false);
    if (writes.length === 0) return results;
    const limit = this.transport.settings.maxConcurrentRequests;
    let round = writes.map((w, at) => ({ ...w, at }));
    let failure: StoreError | undefined;
    for (let attempt = 1; round.length > 0; attempt++) {
      await mapLimited(round, limit, (w) => this.transport.putObject(sliceObjectName(w.slice, w.epoch, w.key), new Uint8Array(0)));
      await this.refresh();
      const lost: ((typeof round)[number] & { error: StoreError })[] = [];
      const gone: (typeof round)[number][] = [];
      /** Beside writes that landed above a binding without an object stamp: withdrawn (SLICE_CONFLICT). */
      const shadowing: (typeof round)[number][] = [];
      const listedKeys = keysWithEntryOrIntent([...this.listedEntryObjects].map((name) => ({ name, lastModifiedMs: 0 })));
      for (const w of round) {
        const id = sliceId(...w.slice);
        const owner = this.state.ownerOf(w.slice);
        // A beside write judged on a view older than a stampless binding (a rebind with a file stamp
        // or none) written just below it would shadow that binding for good: nothing finds it.
        if (w.mode === 'beside' && this.shadowsStamplessBinding(w.slice, w.key, w.epoch)) {
          shadowing.push(w);
          continue;
        }
        // A binding beside others is made once its key is one of the slice's bindings: the latest,
        // or a file binding by its stamp object once another writer's alias went above it.
        if (owner === w.key || (w.mode === 'beside' && this.isBindingOf(w.slice, w.key))) {
          results[w.at] = true;
          continue;
        }
        const conflict = this.conflicts.get(id);
        const top = this.sliceEpochs.get(id);
        // Not bound elsewhere: its own entry object could not be read (damaged, or a bad reply twice in a row: fetchEntryObject).
        const unreadable = owner === undefined && !conflict && !this.state.entries.has(w.key) ? this.problems.find((p) => p.key === w.key) : undefined;
        if (unreadable) {
          throw new StoreError(unreadable.code as StoreErrorCode, `slice ${JSON.stringify(w.slice)} resolves to nothing: the entry object of ${w.key} is not readable (${unreadable.message})`, {
            entry: w.key,
            path: this.root,
            details: { slice: w.slice, requestedKey: w.key },
          });
        }
        if (w.mode === 'rebind' && top !== undefined && top > w.epoch && !conflict) {
          // Rebound above this write by a later rebind: this one counts as done, then overridden.
          results[w.at] = true;
          continue;
        }
        // Its entry object is gone (a dropUnboundEntries since this call's listing found it): not
        // bound, as a local store answers for a gone entry; the caller stores it again. (One that
        // drop puts back, having seen this alias, is bound to nothing once ours goes: still false.)
        // Whoever the owner is: in format 2 a lower binding reads as the owner then, and a beside
        // write took that for a lost race (SLICE_CONFLICT after every retry).
        if ((owner === undefined && !conflict && !this.state.entries.has(w.key)) || !listedKeys.has(w.key)) {
          gone.push(w);
          continue;
        }
        lost.push({
          ...w,
          error: new StoreError('SLICE_CONFLICT', `slice ${JSON.stringify(w.slice)} was bound concurrently: it resolves to ${conflict ? `nothing (${conflict.keys.join(' and ')} at epoch ${top})` : String(owner)}, not ${w.key}`, {
            entry: w.key,
            path: this.root,
            details: { slice: w.slice, owner, conflictingKeys: conflict?.keys, requestedKey: w.key },
          }),
        });
      }
      // An alias of a gone entry goes too: left, it bound the slice to nothing, and to the entry
      // once a writer stores that key again, unasked.
      if (gone.length > 0) await mapLimited(gone, limit, (w) => this.transport.deleteObject(sliceObjectName(w.slice, w.epoch, w.key)));
      if (shadowing.length > 0) {
        await mapLimited(shadowing, limit, (w) => this.transport.deleteObject(sliceObjectName(w.slice, w.epoch, w.key)));
        // A conditional item's (a loader's record) answers false, as a lost move does.
        const refusal = shadowing.find((w) => w.conditional !== true);
        if (refusal !== undefined) failure ??= this.besideRefusedError(refusal);
        if (lost.length === 0) {
          await this.refresh().catch(() => undefined);
          break;
        }
      }
      if (lost.length === 0) {
        if (gone.length > 0) await this.refresh().catch(() => undefined);
        break;
      }
      // Our own losing alias objects go: the slice is back to the other writer's binding (it may
      // have reported it already), or, where every racer deletes its own, to nothing.
      await mapLimited(lost, limit, (w) => this.transport.deleteObject(sliceObjectName(w.slice, w.epoch, w.key)));
      // A binding beside others that met another writer's at its epoch tries again above, as a rebind does.
      const retry = lost.filter((w) => (w.mode === 'rebind' || w.mode === 'beside') && attempt < REBIND_ATTEMPTS);
      for (const w of lost) {
        if (w.mode === 'beside' && w.conditional === true) continue; // false, as a lost move
        if (w.mode === 'plain' || ((w.mode === 'rebind' || w.mode === 'beside') && !retry.includes(w))) failure ??= w.error;
      }
      if (retry.length === 0) {
        // Our losing objects are gone: list again, so that this handle shows the winner's binding
        // rather than the conflict it saw (a lost conditional move returns without a throw; a
        // caller's next lookupBySlice, verify or stamp record reads this view). Best effort: the
        // next refresh catches up all the same, and a failing listing must not hide the outcome.
        await this.refresh().catch(() => undefined);
        break;
      }
      await new Promise<void>((resolve) => setTimeout(resolve, Math.random() * REBIND_PAUSE_MS * attempt));
      await this.refresh();
      round = [];
      for (const w of retry) {
        const id = sliceId(...w.slice);
        if (this.state.ownerOf(w.slice) === w.key || (w.mode === 'beside' && this.isBindingOf(w.slice, w.key))) {
          results[w.at] = true;
          continue;
        }
        // Judged again on this listing: a binding written meanwhile may leave nothing to bind beside
        // (a stampless latest binding would be shadowed by a write above it).
        if (w.mode === 'beside' && !this.mayBindBeside(w.slice, w.key, w.stamp)) {
          if (w.conditional !== true) failure ??= this.besideRefusedError(w);
          continue;
        }
        const current = this.sliceEpochs.get(id);
        const epoch = current === undefined ? 0 : current + 1;
        if (epoch > MAX_SLICE_EPOCH) throw new StoreError('SIZE_INVALID', `slice ${JSON.stringify(w.slice)} was rebound MAX_SLICE_EPOCH times`, { entry: w.key });
        round.push({ ...w, epoch });
      }
    }
    if (failure) throw failure;
    return results;
  }

  /**
   * Whether the cache is format 2 (several bindings per slice), reading cache.json again while this
   * handle saw format 1: another handle may have moved it since this one opened (FILE-BINDINGS.md,
   * "Format gate"). For the calls that delete (unbindSlices, gc, the drop), which must not judge a
   * second binding as shadowed. A format-1 cache costs one GET; the move is never undone.
   * `unreadable`: the answer when cache.json cannot be read (a 404, a garbled reply): gc and the
   * drop pass true (judged as format 2, which keeps more), a loader's besideOnlyIfSeveral false.
   * Callers that judge a listing read it AFTER that listing: the move is PUT before any object of a
   * second binding, so a listing that shows one is followed by a read that shows format 2.
   */
  private async readFormatAgain(refresh = true, unreadable = false): Promise<boolean> {
    if (this.header.format === S3_LAYOUT_FORMAT_PER_FILE) return true;
    const bytes = await this.transport.getSmallObject(HEADER_OBJECT, MAX_HEADER_OBJECT_BYTES);
    if (!bytes) return unreadable;
    let header: S3Header;
    try {
      header = parseHeaderObject(bytes, this.transport.describe(HEADER_OBJECT));
    } catch {
      return unreadable; // Judged at the next open; a reply garbled on the way is no format move.
    }
    if (header.format !== S3_LAYOUT_FORMAT_PER_FILE) return false;
    this.header = header;
    if (refresh) await this.refresh();
    return true;
  }

  /**
   * Whether an alias of `key` at `epoch` stands just above a key that binds nothing for want of a
   * stamp object (its entry there, of the slice's size): a binding made without an object stamp
   * (a rebind with a file stamp, or none) that this alias would shadow for good.
   */
  private shadowsStamplessBinding(slice: SliceKeyTuple, key: string, epoch: number): boolean {
    const set = this.bindingSets.get(sliceId(...slice));
    if (set === undefined) return false;
    let below = -1;
    for (const alias of set.aliases) if (alias.key !== key && alias.epoch < epoch && alias.epoch > below) below = alias.epoch;
    if (below < 0) return false;
    const binding = new Set([...set.bindings, ...set.evicted].map((b) => b.key));
    return set.aliases.some((alias) => alias.epoch === below && alias.key !== key && !binding.has(alias.key) && this.state.getEntry(alias.key)?.rawBytes === slice[2]);
  }

  /**
   * SLICE_CONFLICT for an alias of a slice with no usable latest binding (format 2: its top epoch's
   * key has no listed, readable entry of the slice's size) to a key that is none of its bindings:
   * an alias at the top epoch would conflict with that key, one beside it would stand above a
   * binding nothing can judge. Names the top key and what is wrong with its entry.
   */
  private headlessTopError(slice: SliceKeyTuple, key: string): StoreError {
    const topKey = this.bindingSets.get(sliceId(...slice))?.bindings[0]?.key;
    const entry = topKey === undefined ? undefined : this.state.getEntry(topKey);
    const listed = topKey !== undefined && keysWithEntryOrIntent([...this.listedEntryObjects].map((name) => ({ name, lastModifiedMs: 0 }))).has(topKey);
    const why = entry !== undefined ? `holds ${entry.rawBytes} bytes, not the slice's ${slice[2]}` : listed ? 'is unreadable' : 'is not listed';
    return new StoreError(
      'SLICE_CONFLICT',
      `slice ${JSON.stringify(slice)} has no usable latest binding: the entry object of ${String(topKey)}, bound at its top epoch, ${why}; refusing to bind it to ${key} (rebind to bind ${key} above it, or repair or unbind ${String(topKey)})`,
      { entry: key, path: this.root, details: { slice, topKey, topEntry: entry !== undefined ? 'other-size' : listed ? 'unreadable' : 'not-listed', requestedKey: key } },
    );
  }

  /** SLICE_CONFLICT for a beside write withdrawn: the slice's latest binding has no object stamp now. */
  private besideRefusedError(w: AliasWrite): StoreError {
    return new StoreError(
      'SLICE_CONFLICT',
      `slice ${JSON.stringify(w.slice)} was bound concurrently to a binding without an object stamp (${String(this.state.ownerOf(w.slice) ?? 'none readable')}); binding ${w.key} beside it would shadow it (rebind to move it)`,
      { entry: w.key, path: this.root, details: { slice: w.slice, owner: this.state.ownerOf(w.slice), requestedKey: w.key } },
    );
  }

  /** Whether `key` is one of the slice's bindings in this view. */
  private isBindingOf(slice: SliceKeyTuple, key: string): boolean {
    return this.state.bindingsOf(slice).some((binding) => binding.key === key);
  }

  /** Whether `key` is one of the slice's bindings other than the latest (a format-2 file binding below the top epoch). */
  private isFileBindingOf(slice: SliceKeyTuple, key: string): boolean {
    return this.state.bindingsOf(slice).findIndex((binding) => binding.key === key) > 0;
  }

  /**
   * Whether an alias of `slice` to `key` with `stamp` goes beside the slice's bindings (FILE-BINDINGS.md,
   * phase 2): an object stamp, the slice bound (in this view, no conflict) to other entries only,
   * none holding the stamp, each with an object stamp (a binding without one would be shadowed:
   * nothing would find it), and `key`'s entry of the slice's size. Otherwise the call goes on as
   * with one binding per slice (SLICE_CONFLICT, rebind).
   */
  private mayBindBeside(slice: SliceKeyTuple, key: string, stamp: string | undefined, rawBytes = this.state.getEntry(key)?.rawBytes): boolean {
    if (this.settings.sliceBindingsPerFile !== true || stamp === undefined || shardStampKind(stamp) !== 'object') return false;
    if (rawBytes !== slice[2] || this.sliceEpochs.get(sliceId(...slice)) === undefined || this.conflicts.has(sliceId(...slice))) return false;
    const bindings = this.state.bindingsOf(slice);
    if (bindings.length === 0 || bindings.some((binding) => binding.key === key)) return false;
    return bindings.every((binding) => {
      const stamps = binding.stamps ?? [];
      return !stamps.includes(stamp) && stamps.some((s) => shardStampKind(s) === 'object');
    });
  }

  /**
   * Before the aliases of bindings beside others: cache.json to format 2 where it is format 1 (so no
   * release reading format 1 only opens a cache holding a second binding), then each binding's
   * stamp object (so the binding is found by its stamp from its first moment, and a reader
   * attributes the stamp by that object's name alone).
   */
  private async prepareBeside(stamps: readonly { slice: SliceKeyTuple; key: string; stamp: string }[]): Promise<void> {
    if (this.header.format !== S3_LAYOUT_FORMAT_PER_FILE) {
      const moved = { chunkSize: this.header.chunkSize, coverageMin: this.header.coverageMin, format: S3_LAYOUT_FORMAT_PER_FILE };
      await this.transport.putObject(HEADER_OBJECT, serializeHeaderObject(moved), 'application/json');
      this.header = moved;
    }
    const prefix = this.transport.location.prefix;
    await mapLimited(stamps, this.transport.settings.maxConcurrentRequests, (w) => this.transport.putObject(stampObjectName(w.slice, w.key, w.stamp, prefix), new Uint8Array(0)));
    // Other keys' claims of these stamps go once the write is confirmed (aliasSlices), not here: a
    // write then lost, gone or withdrawn had already removed them.
  }

  /**
   * Deletes the stamp objects of the same slice and stamp under other keys (as this view listed
   * them), once `(slice, key, stamp)` is stored: a stamp names one object's bytes, hashed to `key`.
   * Left, another key's claim came back, trusted, when `key`'s binding went (an unbind, an
   * eviction) or the other key was bound again above it: another entry's bytes served for that
   * stamp. gc removes claims this view did not list (a stamp held by a higher binding: orphan).
   * Each looked at before its DELETE (deleteListed): one written again since this view listed it
   * is another writer's claim now, and stays (it was deleted by name).
   */
  private async deleteOtherClaims(stamps: readonly { slice: SliceKeyTuple; key: string; stamp: string }[]): Promise<void> {
    const claims = new Map<string, { name: string; lastModifiedMs: number }>();
    for (const w of stamps) {
      for (const object of this.stampObjectsBySlice.get(sliceId(...w.slice)) ?? []) {
        if (object.stamp === w.stamp && object.key !== w.key) claims.set(object.name, object);
      }
    }
    if (claims.size === 0) return;
    await deleteListed(this.transport, [...claims.values()]);
    await this.refresh();
  }

  /**
   * Deletes the objects of the bindings past MAX_SLICE_BINDINGS on these slices (readers ignore them
   * already: deriveS3SliceBindings), their alias objects (all below the top epoch) first, then their
   * stamp objects of the slice, and reports each (`onBindingDropped`). Only objects of the judging
   * listing (this view's), each looked at before its DELETE (deleteListed: one written again since
   * is another writer's); a key bound again meanwhile (an alias at or above the judged top epoch,
   * listed just before the deletes) is left alone and not reported: another host's new binding of it
   * lost its stamp, and stood at the top with none, when the stamps were listed afresh.
   */
  private async evictPastLimit(slices: readonly SliceKeyTuple[], onDropped: ((slice: SliceKeyTuple, key: string) => void) | undefined): Promise<void> {
    const done = new Set<string>();
    const dropped: { slice: SliceKeyTuple; key: string }[] = [];
    for (const slice of slices) {
      const id = sliceId(...slice);
      const set = this.bindingSets.get(id);
      if (done.has(id) || set === undefined || set.evicted.length === 0) continue;
      done.add(id);
      const keys = new Set(set.evicted.map((binding) => binding.key));
      for (const object of await this.transport.list(sliceDirName(slice))) {
        const alias = parseSliceObjectName(object.name);
        if (alias !== undefined && alias.epoch >= set.topEpoch) keys.delete(alias.key);
      }
      if (keys.size === 0) continue;
      const aliases = set.aliases.filter((alias) => keys.has(alias.key) && alias.epoch < set.topEpoch);
      await deleteListed(this.transport, aliases);
      const stamps = (this.stampObjectsBySlice.get(id) ?? []).filter((object) => keys.has(object.key));
      await deleteListed(this.transport, stamps);
      for (const key of keys) dropped.push({ slice, key });
    }
    if (dropped.length === 0) return;
    await this.refresh();
    if (onDropped) for (const { slice, key } of dropped) callHook(() => onDropped(slice, key));
  }

  aliasSlice(keyOrBytes: string | TensorBytesRef, shardName: string, offsetBytes: number, sizeBytes: number, stamp?: string): Promise<boolean> {
    return this.aliasSlices([{ key: keyOrBytes, shardName, offsetBytes, sizeBytes, ...(stamp === undefined ? {} : { stamp }) }]).then((results) => results[0]!);
  }

  /**
   * Waits for an alias write (writeAliases), then records the stamps of the slices bound as asked
   * (recordStamps), also when the writes end in SLICE_CONFLICT: the other slices of the call stay
   * bound (batches are not atomic), so their stamps are theirs; then the conflict is thrown.
   */
  private async settleThenRecordStamps(aliases: Promise<boolean[]>, stamps: readonly StampWrite[]): Promise<boolean[]> {
    let results: boolean[];
    try {
      results = await aliases;
    } catch (error) {
      if (isStoreError(error) && error.code === 'SLICE_CONFLICT') await this.recordStamps(stamps);
      throw error;
    }
    await this.recordStamps(stamps);
    return results;
  }

  /**
   * Records the stamps of the slices that are now bound to their stamp's key (this instance's view
   * was refreshed by the caller). Object stamps: one empty stamp object per (slice, key, stamp), so
   * a second write is harmless; a stamp the binding shows already is not written again, unless this
   * call wrote the alias (a fresh PUT keeps gc, whose listing may be older than the binding, off the
   * object); then a refresh, so that this instance shows them. File stamps: host stamps
   * (HostFileStamps), in memory and in the read-through directory, never failing the call.
   */
  private async recordStamps(writes: readonly StampWrite[]): Promise<void> {
    const names = new Set<string>();
    const recorded: { slice: SliceKeyTuple; key: string; stamp: string }[] = [];
    const hostWrites: HostStampWrite[] = [];
    for (const w of writes) {
      // Lost a race, or left out: not this key's binding (in format 2 any of the slice's, one per file).
      const binding = this.state.bindingsOf(w.slice).find((b) => b.key === w.key) ?? this.headlessBindings.get(sliceId(...w.slice))?.find((b) => b.key === w.key);
      if (binding === undefined) continue;
      if (shardStampKind(w.stamp) === 'file') {
        hostWrites.push(w);
        continue;
      }
      if (!w.aliasWritten && (binding.stamps ?? []).includes(w.stamp)) continue;
      names.add(stampObjectName(w.slice, w.key, w.stamp, this.transport.location.prefix));
      recorded.push(w);
    }
    if (names.size > 0) {
      await mapLimited([...names], this.transport.settings.maxConcurrentRequests, (name) => this.transport.putObject(name, new Uint8Array(0)));
      await this.refresh();
      await this.deleteOtherClaims(recorded);
    }
    await this.hostStamps.record(hostWrites);
  }

  async aliasSlices(items: readonly AliasSliceItem[], options: AliasSlicesOptions = {}): Promise<boolean[]> {
    this.assertOpen();
    checkCallItems(items, 'aliasSlices', 'an AliasSliceItem object ({ key, shardName, offsetBytes, sizeBytes, stamp? })');
    checkAliasOptions(options);
    checkItemFields(items, 'aliasSlices');
    const rebind = options.rebind === true;
    const resolved = items.map((item) => {
      // The stamp is validated as the local store does: an object stamp goes to the bucket, a file stamp to this host (recordStamps).
      const stamped = validateSliceKey(
        item.stamp === undefined ? [item.shardName, item.offsetBytes, item.sizeBytes] : [item.shardName, item.offsetBytes, item.sizeBytes, [item.stamp]],
        undefined,
        'INVALID_ARGUMENT',
      );
      encodeShardName(stamped[0]);
      const key = resolveAliasKey(item);
      const stamp = stamped[3]?.[0];
      // Checked before anything is written: a stamp whose object key would not fit is INVALID_ARGUMENT.
      if (stamp !== undefined && key !== undefined && shardStampKind(stamp) === 'object') stampObjectName(stamped, key, stamp, this.transport.location.prefix);
      return { key, slice: withoutStamps(stamped), stamp, moveFrom: checkMoveFrom(item, rebind) };
    });
    await this.refresh();
    const results = resolved.map(() => false);
    const draft = new StateDraft(this.state);
    const writes: (AliasWrite & { at: number })[] = [];
    const stampWrites: StampWrite[] = [];
    /** Stamps of bindings added beside others: PUT before their aliases (FILE-BINDINGS.md, phase 2). */
    const besideStamps: { slice: SliceKeyTuple; key: string; stamp: string }[] = [];
    const context = { source: 'this call', path: this.root };
    // An item the draft shows bound to its key by an earlier item's write in this call (the same
    // slice twice, with other stamps) is answered by the view after the writes (writeAliases lists
    // again): a conditional write may lose, and a lost chain of moves leaves the listing's binding.
    const lastWrite = new Map<string, number>();
    const follows: { at: number; key: string; slice: SliceKeyTuple }[] = [];
    const followEarlierWrite = (id: string, key: string, slice: SliceKeyTuple, at: number) => {
      const write = lastWrite.get(id);
      if (write !== undefined && writes[write]!.key === key) follows.push({ at, key, slice });
    };
    resolved.forEach(({ key, slice, stamp, moveFrom }, at) => {
      if (key === undefined || !draft.getEntry(key)) return;
      const id = sliceId(...slice);
      const conflicted = this.conflicts.has(id);
      // A conditional item (moveFrom) is judged on this listing: a conflict it did not cause, or a
      // slice bound to a third key ('taken'), is another writer's doing: false, nothing written.
      if (conflicted && moveFrom !== undefined) return;
      // `moveFrom` naming the item's own key (a loader's record: bind if unbound, add the stamp if
      // bound to it, else nothing moved) is judged as a plain alias for lower and beside bindings
      // (phase 2), as a local handle judges it: its stamp recorded with a lower binding of that key,
      // its binding added beside other objects' (as besideOnlyIfSeveral, set or not). A beside one answered false
      // (no load ever bound beside), and a lower key's of a slice with no latest false too.
      const plain = moveFrom === undefined || moveFrom === key;
      const headless = rebind || !plain ? undefined : this.headlessBindings.get(id);
      if (headless !== undefined) {
        // No usable latest binding (format 2, takePerFileView). A lower binding of `key` stays as it
        // is, only its stamp may be new (as isFileBindingOf below): written at the top epoch, its
        // alias met the top's, was withdrawn and threw, at every load, also for a stamp it held.
        if (headless.some((owner) => owner.key === key)) {
          results[at] = true;
          if (stamp !== undefined) stampWrites.push({ slice, key, stamp, aliasWritten: false });
          return;
        }
        // A conditional item leaves another key's slice to that binding's writer: false.
        if (moveFrom !== undefined) return;
        if (!conflicted && this.bindingSets.get(id)?.bindings[0]?.key !== key) throw this.headlessTopError(slice, key);
      }
      if (conflicted && !rebind) this.assertNoConflict(slice, key);
      if (this.header.format === S3_LAYOUT_FORMAT_PER_FILE && !rebind && plain && !conflicted && this.isFileBindingOf(slice, key)) {
        // A file binding below the top already (format 2): only the stamp may be new; an alias
        // object at the top epoch would be a conflict with the latest binding.
        results[at] = true;
        if (stamp !== undefined) stampWrites.push({ slice, key, stamp, aliasWritten: false });
        return;
      }
      if (this.settings.sliceBindingsPerFile === true && !rebind && plain && !conflicted && this.mayBindBeside(slice, key, stamp)) {
        const current = this.sliceEpochs.get(id)!;
        if (current + 1 > MAX_SLICE_EPOCH) throw new StoreError('SIZE_INVALID', `slice ${JSON.stringify(slice)} was rebound MAX_SLICE_EPOCH times`, { entry: key });
        besideStamps.push({ slice, key, stamp: stamp! });
        lastWrite.set(id, writes.length);
        writes.push({ key, slice, epoch: current + 1, mode: 'beside', stamp: stamp!, at, ...(moveFrom === undefined ? {} : { conditional: true }) });
        return;
      }
      const owner = draft.ownerOf(slice);
      const plan = draft.planAlias(key, slice, rebind, context, moveFrom);
      if (plan === 'already-bound') {
        results[at] = true;
        followEarlierWrite(id, key, slice, at);
      }
      if (plan !== 'bound' && !conflicted) {
        // Bound to this key already: only the stamp may be new (no alias object to write).
        if (plan === 'already-bound' && stamp !== undefined) stampWrites.push({ slice, key, stamp, aliasWritten: false });
        return;
      }
      if (stamp !== undefined) stampWrites.push({ slice, key, stamp, aliasWritten: true });
      const current = this.sliceEpochs.get(id);
      // A rebind, a conditional move off `moveFrom`, or settling a conflict goes one epoch above
      // what is there. A plain alias (or a conditional one of an unbound slice) goes at the current
      // epoch: if an alias object of another key is there whose entry is not listed yet, the two
      // conflict at read time instead of one silently replacing the other.
      const above = rebind || conflicted || (moveFrom !== undefined && owner !== undefined);
      const epoch = current === undefined ? 0 : above ? current + 1 : current;
      if (epoch > MAX_SLICE_EPOCH) throw new StoreError('SIZE_INVALID', `slice ${JSON.stringify(slice)} was rebound MAX_SLICE_EPOCH times`, { entry: key });
      lastWrite.set(id, writes.length);
      writes.push({ key, slice, epoch, mode: moveFrom !== undefined ? 'move' : above ? 'rebind' : 'plain', at });
    });
    if (writes.length === 0) {
      await this.recordStamps(stampWrites);
      return results;
    }
    // besideOnlyIfSeveral items (a loader's records): beside others only where cache.json is format 2
    // already (read again: another handle may have moved it), or another item of this call moves it;
    // else not applied, so that a loader never moves a cache to a format older releases refuse.
    const refused: { slice: SliceKeyTuple; key: string }[] = [];
    // A conditional item (moveFrom: a beside write's names its own key, a loader's record) counts as
    // besideOnlyIfSeveral even without the field (a caller's store wrapped by the runtime): a load
    // never moves cache.json to format 2.
    const onlyIfSeveral = (w: { at: number }): boolean => items[w.at]?.besideOnlyIfSeveral === true || resolved[w.at]?.moveFrom !== undefined;
    if (writes.some((w) => w.mode === 'beside' && onlyIfSeveral(w))) {
      const moves = writes.some((w) => w.mode === 'beside' && !onlyIfSeveral(w));
      if (!moves && !(await this.readFormatAgain(false))) {
        for (let i = writes.length - 1; i >= 0; i--) {
          const w = writes[i]!;
          if (w.mode !== 'beside' || !onlyIfSeveral(w)) continue;
          writes.splice(i, 1);
          refused.unshift({ slice: w.slice, key: w.key });
          const at = besideStamps.findIndex((b) => b.slice === w.slice && b.key === w.key);
          if (at >= 0) besideStamps.splice(at, 1);
        }
      }
    }
    const onRefused = options.onBesideRefused;
    const tellRefused = (): void => {
      if (onRefused) for (const { slice, key } of refused) callHook(() => onRefused(slice, key));
    };
    if (writes.length === 0) {
      await this.recordStamps(stampWrites);
      tellRefused();
      return results;
    }
    if (besideStamps.length > 0) await this.prepareBeside(besideStamps);
    // Plain and rebind writes that lose throw; a conditional one that loses answers false.
    const bound = await this.settleThenRecordStamps(this.writeAliases(writes), stampWrites);
    writes.forEach((write, i) => {
      results[write.at] = bound[i] === true;
    });
    // Bound beside: the stamp is K's now, other keys' claims of it go (One stamp, one key).
    const confirmed = besideStamps.filter((b) => writes.some((w, i) => w.mode === 'beside' && bound[i] === true && w.slice === b.slice && w.key === b.key));
    if (confirmed.length > 0) await this.deleteOtherClaims(confirmed);
    if (besideStamps.length > 0) await this.evictPastLimit(besideStamps.map((w) => w.slice), options.onBindingDropped);
    tellRefused();
    for (const { at, key, slice } of follows) results[at] = this.state.ownerOf(slice) === key;
    return results;
  }

  /**
   * Deletes the alias objects of each slice bound (to the item's key, where given) in a fresh
   * listing, and the stamp objects of the keys they bound (removeS3SliceBinding), then refreshes.
   * This host's file stamps of those bindings stay in its read-through directory: they say what a
   * file held at the slice, still true should the slice be bound to that key again.
   */
  async unbindSlices(items: readonly UnbindSliceItem[]): Promise<number> {
    this.assertOpen();
    const checked = checkUnbindItems(items);
    for (const item of checked) encodeShardName(item.slice[0]);
    await this.refresh();
    // A look for this view only (which items are bound, lower bindings included where it moved):
    // each item's removal asks again after its own listing (removeS3Bindings), and that answer decides.
    await this.readFormatAgain();
    // Those bound in this view; each is listed again, alone, before anything of it is deleted.
    const bound = checked.filter((item) => isUnbindable(this.state, item) || this.conflicts.has(sliceId(...item.slice)));
    if (bound.length === 0) return 0;
    // Format 2: what binds is a listed entry object (the view's rule, takePerFileView); the item's
    // key's binding only, or every one, each counted.
    const withObject = keysWithEntryOrIntent([...this.listedEntryObjects].map((name) => ({ name, lastModifiedMs: 0 })));
    const bindable = (key: string): boolean => withObject.has(key);
    const isPerFile = (): Promise<boolean> => this.readFormatForDelete('unbindSlices');
    const counts = await mapLimited(bound, this.transport.settings.maxConcurrentRequests, (item) => removeS3Bindings(this.transport, item, isPerFile, bindable));
    await this.refresh();
    return counts.reduce((sum, n) => sum + n, 0);
  }

  /**
   * Whether cache.json says format 2, read again (while this handle saw format 1) after the listing
   * a deleting call judges; throws where it cannot be read (a 404: NOT_A_CACHE; a reply that does
   * not parse: its MANIFEST_INVALID or UNSUPPORTED_FORMAT), nothing deleted. For `unbindSlices`,
   * where neither answer is safe: format 1 on a format-2 cache deletes other files' bindings below
   * the latest; format 2 on a format-1 cache brings a shadowed alias back as the latest, which a
   * reader without a stamp trusts. (gc and the drop judge an unreadable one as format 2: they only
   * keep more.)
   */
  private async readFormatForDelete(caller: string): Promise<boolean> {
    if (this.header.format === S3_LAYOUT_FORMAT_PER_FILE) return true;
    const path = this.transport.describe(HEADER_OBJECT);
    const bytes = await this.transport.getSmallObject(HEADER_OBJECT, MAX_HEADER_OBJECT_BYTES);
    const unreadable = (why: string, code: StoreErrorCode, cause?: unknown): StoreError =>
      new StoreError(code, `${caller}: cache.json ${why} after the slice was listed; whether the slice holds one binding per file is unknown, so nothing of it was removed (call again)`, {
        path,
        details: { caller },
        ...(cause === undefined ? {} : { cause }),
      });
    if (!bytes) throw unreadable('was not found (404)', 'NOT_A_CACHE');
    let header: S3Header;
    try {
      header = parseHeaderObject(bytes, path);
    } catch (error) {
      throw unreadable(`could not be read (${isStoreError(error) ? error.reason : String(error)})`, isStoreError(error) ? error.code : 'MANIFEST_INVALID', error);
    }
    if (header.format !== S3_LAYOUT_FORMAT_PER_FILE) return false;
    this.header = header;
    return true;
  }

  /**
   * No writer lock here: intent objects stand in for one (README "S3 layout", Removing entries), so
   * a drop runs beside builds, loaders, gc and other drops (`exclusive` is accepted, no effect). A
   * killed drop's stale intents are resolved first; then one listing of the whole prefix judges,
   * and the candidates go in batches: intent PUT, entry DELETE (looked at first), slices/ listed
   * again and an entry bound meanwhile (or since the judging listing) put back, the others' blobs
   * deleted only under no other drop's intent, the intents deleted last (s3-drop-unbound-entries.ts).
   * `minAgeMs` as gc's.
   */
  async dropUnboundEntries(options: S3DropUnboundEntriesOptions = {}): Promise<DropUnboundEntriesReport> {
    this.assertOpen();
    checkDropUnboundOptions(options, S3_DROP_EXTRA_OPTIONS);
    checkBooleanOption(options.allowMinAgeBelowFloorForTests, 'allowMinAgeBelowFloorForTests', 'dropUnboundEntries');
    const minAgeMs = this.checkMinAgeMs(options);
    // Format 2: a key bound below its slice's top epoch is bound (FILE-BINDINGS.md, phase 2). Read
    // after each listing that judges (this one's, the resolver's, each batch's recheck): another
    // handle may move the cache meanwhile; unreadable counts as format 2 (keeps more).
    const formatNow = (): Promise<boolean> => this.readFormatAgain(false, true);
    // A killed drop's intents first (their entries may be bound: put back before anything is judged).
    // One intent's failure leaves that intent (its blob kept) and is reported; the drop goes on.
    const resolved = options.dryRun === true ? undefined : await resolveStaleDropIntents(this.transport, minAgeMs, MAX_ENTRY_OBJECT_BYTES, formatNow);
    // Parses every entry object (the listing below judges by their fields); one listed only after
    // it is younger than any minAgeMs allows, and stays.
    await this.refresh();
    const listingStarted = performance.now();
    const listing = await this.transport.list('');
    const now = this.listingNowMs(listingStarted);
    const perFile = await formatNow();
    const entryOf = (name: string): CacheEntry | undefined => {
      const parsed = this.entryObjects.get(name);
      return parsed !== undefined && 'blob' in parsed ? parsed : undefined;
    };
    const candidates = findS3UnboundEntries(listing, entryOf, now, minAgeMs, perFile);
    if (options.dryRun === true) return reportDrop(candidates.map((c) => c.entry), true);
    // The listing's start by the judging clock, less a second (Last-Modified's resolution) and less
    // CLOCK_OFFSET_NOISE_MS (a local clock less than that ahead of the server is not corrected): an
    // alias object a resolver finds written since is bound, as this drop's second listing judges.
    const report = await dropS3UnboundEntries(this.transport, candidates, listing, now - 1000 - CLOCK_OFFSET_NOISE_MS, minAgeMs, MAX_ENTRY_OBJECT_BYTES, perFile || formatNow);
    await this.refresh();
    const resolution = resolved === undefined ? undefined : staleDropResolutionOf(resolved);
    return {
      ...report,
      ...(resolved !== undefined && resolved.resolved.length > 0 ? { staleDropIntents: resolved.resolved } : {}),
      ...(resolution === undefined ? {} : { staleDropResolution: resolution }),
    };
  }

  // ---- maintenance --------------------------------------------------------------------------

  /** Nothing to fold: S3 caches have no journal. */
  readonly needsCompaction = false;

  /** Nothing to fold: S3 caches have no journal. */
  async compact(): Promise<void> {
    this.assertOpen();
  }

  async verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    this.assertOpen();
    checkVerifyOptions(options);
    await this.refresh();
    // One listing of blobs/ gives every blob's size: an entry is checked against it before any
    // buffer is sized from its comp_bytes (a hostile or damaged entry may claim ~4 GiB for a blob
    // that does not exist), as the local store checks the file first.
    const blobSizes = new Map<string, number>();
    const listBlobs = async (): Promise<void> => {
      blobSizes.clear();
      for (const object of await this.transport.list(BLOBS_DIR)) blobSizes.set(object.name, object.sizeBytes);
    };
    await listBlobs();
    const reader = {
      // The transport keeps to this many requests at once: more entries in flight would only wait there.
      verifyConcurrency: this.transport.settings.maxConcurrentRequests,
      checkBlob: async (key: string, _blob: string, expectedBytes: number) => {
        const entry = this.state.entries.get(key);
        if (!entry) throw new StoreError('ENTRY_NOT_FOUND', 'no entry with this key', { entry: key });
        const name = blobObjectName(entry.key, blobSha256Of(entry));
        const sizeBytes = blobSizes.get(name);
        if (sizeBytes === undefined) throw new StoreError('BLOB_MISSING', 'the listing of blobs/ has no blob object for it', { entry: key, path: this.transport.describe(name) });
        if (sizeBytes !== expectedBytes) {
          throw new StoreError('BLOB_SIZE_MISMATCH', `the listing of blobs/ gives its blob object ${sizeBytes} bytes, the entry says ${expectedBytes}`, {
            entry: key,
            path: this.transport.describe(name),
            details: { readBytes: sizeBytes, expectedBytes },
          });
        }
      },
      readBlobInto: async (key: string, _blob: string, target: Uint8Array) => {
        const entry = this.state.entries.get(key);
        if (!entry) throw new StoreError('ENTRY_NOT_FOUND', 'no entry with this key', { entry: key });
        await this.readObjectInto(entry, target);
      },
    };
    let report = await verifyEntries(reader, [...this.state.entries.values()], this.changes, options);
    // One bad reply (a body cut or damaged in transit, a listing or a 404 of a moment) is no verdict
    // on a blob: the entries found bad are checked once more, from a new listing and new reads, and
    // only what fails again is reported (verify under such faults reported intact blobs damaged).
    const suspects = [...new Set(report.problems.filter((p) => p.code !== 'S3_UNAVAILABLE').map((p) => p.key))].map((key) => this.state.entries.get(key)).filter((e) => e !== undefined);
    // (An unreachable server is reported below as it is: nothing to check again.)
    if (suspects.length > 0 && !report.problems.some((p) => p.code === 'S3_UNAVAILABLE')) {
      await listBlobs();
      const again = await verifyEntries(reader, suspects, this.changes, { ...options, onProgress: undefined });
      const suspectKeys = new Set(suspects.map((e) => e.key));
      const problems = [...report.problems.filter((p) => !suspectKeys.has(p.key)), ...again.problems];
      report = { ...report, ok: problems.length === 0, passed: report.passed + again.passed, decoded: report.decoded + again.decoded, bytesRead: report.bytesRead + again.bytesRead, problems };
    }
    const extra: VerifyProblem[] = this.problems.map((p) => ({ key: p.key, qualname: this.state.entries.get(p.key)?.qualname ?? '', code: p.code, message: p.message }));
    extra.push(...(await this.findDanglingBindings()));
    // An unreachable server is not a verdict on the cache: surface it instead of reporting every entry bad.
    const unavailable = report.problems.find((p) => p.code === 'S3_UNAVAILABLE');
    if (unavailable) {
      // The problem's message is the error's, code included: once is enough.
      const reason = unavailable.message.startsWith('S3_UNAVAILABLE: ') ? unavailable.message.slice('S3_UNAVAILABLE: '.length) : unavailable.message;
      throw new StoreError('S3_UNAVAILABLE', reason, { path: this.root, details: { endpoint: this.transport.endpoint } });
    }
    return { ...report, ok: report.ok && extra.length === 0, problems: [...report.problems, ...extra] };
  }

  /**
   * Slices bound at their top epoch to a key with no entry object and no drop's intent for it (a
   * binding whose entry went: readers serve the slice raw), for verify: ENTRY_NOT_FOUND,
   * `reason: 'dangling-binding'`, one per key. From fresh listings (the view waits for an entry
   * not listed yet); a key under a drop's intent may be put back by that drop.
   */
  private async findDanglingBindings(): Promise<VerifyProblem[]> {
    // In this order, one after another: a writer PUTs its entry object before its alias, and a drop
    // its intent before its entry DELETE, so a key missing from entries/ shows up in dropping/ listed
    // after it (listed in parallel, a drop between the two listings was a false dangling binding).
    const slices = await this.transport.list(SLICES_DIR);
    const entries = await this.transport.list(ENTRIES_DIR);
    const intents = await this.transport.list(DROPPING_DIR);
    const present = new Set<string>();
    for (const object of entries) {
      const parsed = parseEntryObjectName(object.name);
      if (parsed) present.add(parsed.key);
    }
    for (const object of intents) {
      const parsed = parseDropIntentObjectName(object.name);
      if (parsed) present.add(parsed.key);
    }
    const dangling = new Map<string, string[]>();
    for (const { slice, keys } of topAliasKeys(slices.map((o) => o.name)).values()) {
      for (const key of keys) {
        if (present.has(key)) continue;
        const list = dangling.get(key) ?? [];
        list.push(`${slice[0]}@${slice[1]}+${slice[2]}`);
        dangling.set(key, list);
      }
    }
    return [...dangling].sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, slices]) => ({
      key,
      qualname: '',
      code: 'ENTRY_NOT_FOUND',
      reason: 'dangling-binding',
      message: `dangling binding: ${slices.length} slice${slices.length === 1 ? ' is' : 's are'} bound at ${slices.length === 1 ? 'its' : 'their'} top epoch to this key, which has no entry object (${slices.slice(0, 3).join(', ')}${slices.length > 3 ? ', …' : ''}): readers serve ${slices.length === 1 ? 'it' : 'them'} raw; splitzip build binds ${slices.length === 1 ? 'it' : 'them'} again`,
    }));
  }

  /**
   * gc's and dropUnboundEntries' `minAgeMs` (default DEFAULT_GC_MIN_AGE_MS), INVALID_ARGUMENT when
   * not a non-negative number or below MIN_S3_GC_AGE_MS (unless allowMinAgeBelowFloorForTests).
   */
  private checkMinAgeMs(options: { minAgeMs?: number | undefined; allowMinAgeBelowFloorForTests?: boolean | undefined }): number {
    const minAgeMs = options.minAgeMs ?? DEFAULT_GC_MIN_AGE_MS;
    if (typeof minAgeMs !== 'number' || Number.isNaN(minAgeMs) || minAgeMs < 0) {
      throw new StoreError('INVALID_ARGUMENT', 'minAgeMs must be a non-negative number of milliseconds', { path: this.root, details: { minAgeMs: detailValue(minAgeMs) } });
    }
    // Younger orphans may be blobs of a writer between its blob and entry PUTs (younger unbound
    // entries: between its entry and alias PUTs): deleting them left committed entries without
    // their bytes (BLOB_MISSING) while the build reported success. A dry run is refused too, so
    // that it reports what a real run of the same options would do.
    if (minAgeMs < MIN_S3_GC_AGE_MS && options.allowMinAgeBelowFloorForTests !== true) {
      throw new StoreError(
        'INVALID_ARGUMENT',
        `minAgeMs ${minAgeMs} ms is below MIN_S3_GC_AGE_MS (${MIN_S3_GC_AGE_MS} ms, ${MIN_S3_GC_AGE_MS / 60_000} min): a writer may still be between a blob's PUT and its entry's PUT`,
        { path: this.root, details: { option: 'minAgeMs', minAgeMs, floor: MIN_S3_GC_AGE_MS } },
      );
    }
    return minAgeMs;
  }

  /**
   * The "now" a listing's ages are judged by: the moment it started (`startedMs`, performance.now():
   * an object listed late is not aged by the listing's own minutes), on the earlier of this
   * machine's clock and the server's as the listing's replies last told it (S3Transport.judgingNowMs;
   * a first request refused for skew, or this machine's clock stepped meanwhile, is corrected only by then).
   */
  /**
   * After an entry look that found none: whether `key` has a drop's intent now, or an entry object
   * again after that (a drop may put the entry back and remove its intent between the looks).
   */
  private async hasIntentOrEntryAgain(key: string): Promise<boolean> {
    const intentsNow = await this.transport.list(`${DROPPING_DIR}${key}.`);
    if (intentsNow.some((o) => parseDropIntentObjectName(o.name)?.key === key)) return true;
    const entriesNow = await this.transport.list(`${ENTRIES_DIR}${key}.`);
    return entriesNow.some((o) => parseEntryObjectName(o.name)?.key === key);
  }

  private listingNowMs(startedMs: number): number {
    return this.transport.judgingNowMs() - (performance.now() - startedMs);
  }

  async gc(options: S3GcOptions = {}): Promise<GcReport> {
    this.assertOpen();
    checkGcOptions(options, S3_GC_EXTRA_OPTIONS);
    checkBooleanOption(options.allowMinAgeBelowFloorForTests, 'allowMinAgeBelowFloorForTests', 'gc');
    const started = performance.now();
    const minAgeMs = this.checkMinAgeMs(options);
    const listingStarted = performance.now();
    // Every entry object counts as a reference, also other encodings of a key and invalid ones.
    const [all, uploads] = await Promise.all([this.transport.list(''), this.transport.listMultipartUploads()]);
    const now = this.listingNowMs(listingStarted);
    // Format 2: a stamp object of a binding below the top epoch lives (FILE-BINDINGS.md, phase 2).
    // Read after the listing (a move before it shows), and again after each recheck's listing;
    // unreadable counts as format 2 (keeps more).
    const formatNow = (): Promise<boolean> => this.readFormatAgain(false, true);
    const perFile = await formatNow();
    // Drops' intent objects, listed after entries/ (the whole prefix's listing reaches dropping/
    // before entries/): an entry object that listing missed was deleted after its intent's PUT, so
    // its intent is here unless that drop was done with it. Its blob is no orphan meanwhile.
    const intents = await this.transport.list(DROPPING_DIR);
    const underDrop = new Set<string>();
    for (const object of intents) {
      const intent = parseDropIntentObjectName(object.name);
      if (intent) underDrop.add(blobObjectName(intent.key, intent.blobSha256));
    }
    const referenced = new Set<string>();
    const entryKeys = new Set<string>();
    for (const object of all) {
      const name = parseEntryObjectName(object.name);
      if (name) referenced.add(blobObjectName(name.key, name.blobSha256));
      if (name) entryKeys.add(name.key);
    }
    // A stamp object lives while its key is among its slice's top-epoch keys (a conflict may be
    // settled either way) and the key's entry object exists.
    const tops = topAliasKeys(all.map((o) => o.name));
    // A key whose entry object is under a drop's intent has one: the drop may put it back.
    const stampLives = (key: string, topKeys: ReadonlySet<string> | undefined, hasEntry: boolean): boolean => topKeys?.has(key) === true && hasEntry;
    const intentKeys = new Set<string>();
    for (const object of intents) {
      const intent = parseDropIntentObjectName(object.name);
      if (intent) intentKeys.add(intent.key);
    }
    // Format 2: a stamp object lives while its key is one of its slice's bindings (any epoch:
    // deriveS3SliceBindings; an evicted one's are orphans), its entry object there.
    // A stamp a higher binding holds is an orphan under its lower key (holdsStampObject): left, it
    // came back to that key, trusted, once the higher binding went.
    const perFileSets = perFile
      ? deriveS3SliceBindings(all.filter((o) => o.name.startsWith(SLICES_DIR)), all.filter((o) => o.name.startsWith(STAMPS_DIR)), (key) => entryKeys.has(key) || intentKeys.has(key))
      : undefined;
    const perFileKeys = perFileSets ? boundKeysBySlice(perFileSets) : undefined;
    const liveKeysOf = (slice: SliceKeyTuple): ReadonlySet<string> | undefined => (perFileKeys ? perFileKeys.get(sliceId(...slice)) : tops.get(sliceId(...slice))?.keys);
    let orphanStamps: string[] = [];
    /** Stamp objects of live bindings, per binding: readers take the newest MAX_SLICE_STAMPS. */
    const liveStamps = new Map<string, ListedObject[]>();
    let orphanBlobs: string[] = [];
    const orphanSizes = new Map<string, number>();
    const unknownFiles: string[] = [];
    let orphanBytes = 0;
    /** What was left as younger than minAgeMs (GcReport.keptYoung). */
    const keptYoung: GcKeptYoung = { orphanBlobs: 0, orphanBytes: 0, tempFiles: 0, orphanStamps: 0, orphanAliases: 0 };
    const old = (lastModifiedMs: number): boolean => now - lastModifiedMs >= minAgeMs;
    // Alias objects below their slice's top epoch whose key has no entry object (dropped): they bind
    // nothing now, and would bind that key again, unasked, should the objects above them go.
    let orphanAliases: string[] = [];
    for (const object of all) {
      const alias = parseSliceObjectName(object.name);
      // A key under a drop's intent has an entry object for this too: that drop (or the resolver of
      // its intent) counts this alias, written since it judged, as a binding, and puts the entry back.
      if (!alias || entryKeys.has(alias.key) || intentKeys.has(alias.key) || !aliasShadowed(alias, tops.get(sliceId(...alias.slice))?.epoch)) continue;
      if (old(object.lastModifiedMs)) orphanAliases.push(object.name);
      else keptYoung.orphanAliases++;
    }
    let keptUnderDrop = 0;
    for (const object of all) {
      if (object.name === HEADER_OBJECT || parseEntryObjectName(object.name) || parseSliceObjectName(object.name) || parseDropIntentObjectName(object.name)) continue;
      const stamp = parseStampObjectName(object.name);
      if (stamp) {
        const live =
          stampLives(stamp.key, liveKeysOf(stamp.slice), entryKeys.has(stamp.key) || intentKeys.has(stamp.key)) &&
          (perFileSets === undefined || holdsStampObject(perFileSets.get(sliceId(...stamp.slice)), stamp.key, stamp.stamp));
        if (!live && old(object.lastModifiedMs)) orphanStamps.push(object.name);
        else if (!live) keptYoung.orphanStamps++;
        if (live) {
          const binding = `${sliceId(...stamp.slice)}\n${stamp.key}`;
          let list = liveStamps.get(binding);
          if (!list) liveStamps.set(binding, (list = []));
          list.push(object);
        }
        continue;
      }
      if (parseBlobObjectName(object.name)) {
        if (!referenced.has(object.name) && underDrop.has(object.name)) keptUnderDrop++;
        else if (!referenced.has(object.name) && old(object.lastModifiedMs)) {
          orphanBlobs.push(object.name);
          orphanSizes.set(object.name, object.sizeBytes);
          orphanBytes += object.sizeBytes;
        } else if (!referenced.has(object.name)) {
          keptYoung.orphanBlobs++;
          keptYoung.orphanBytes += object.sizeBytes;
        }
        continue;
      }
      unknownFiles.push(object.name);
    }
    // Beyond a binding's newest MAX_SLICE_STAMPS (in the order readers take them) a stamp object is
    // never read again: each re-uploaded model version added one per tensor, listed by every refresh.
    /** Superseded stamp objects, with the LastModified gc listed them with. */
    const supersededStamps = new Map<string, number>();
    for (const list of liveStamps.values()) {
      if (list.length <= MAX_SLICE_STAMPS) continue;
      list.sort(compareStampObjects);
      for (const object of list.slice(0, list.length - MAX_SLICE_STAMPS)) {
        if (old(object.lastModifiedMs)) supersededStamps.set(object.name, object.lastModifiedMs);
        else keptYoung.orphanStamps++;
      }
    }
    orphanStamps.push(...supersededStamps.keys());
    const staleUploads = uploads.filter((u) => old(u.initiatedMs));
    keptYoung.tempFiles = uploads.length - staleUploads.length;
    let staleDropIntents: string[] = intents.filter((o) => parseDropIntentObjectName(o.name) !== undefined && now - o.lastModifiedMs >= Math.max(DROP_INTENT_STALE_MS, minAgeMs)).map((o) => o.name);
    let staleDropResolution: StaleDropResolution | undefined;
    if (!options.dryRun) {
      const limit = this.transport.settings.maxConcurrentRequests;
      // The listing is minutes old on a big bucket: a writer may have stored this blob again and
      // committed its entry since (a re-added tensor). Look again just before each delete: skip a
      // blob whose entry object now exists or which was written again since (younger than
      // minAgeMs). Deleted unchecked, such a blob left a committed entry without its bytes.
      // Written again since the listing: counted in keptYoung (the last look's verdict, per object).
      const young = new Set<string>();
      const youngNow = (name: string, head: HeadedObject): boolean => {
        const isYoung = this.transport.judgingNowMs() - head.lastModifiedMs < minAgeMs;
        if (isYoung) young.add(name);
        else young.delete(name);
        return isYoung;
      };
      // checkBlobDeletable's looks, as the drop's for its dropped blobs: the entry object, a drop's
      // intent for its entry, the entry object again (a drop may put it back and remove its intent
      // between the two looks), and LAST, right before the DELETE, the blob's age: a writer's blob
      // PUT before that look is seen (young), so only one inside the last round trip whose entry PUT
      // lands after the entry looks is lost (window (c)).
      const keptForDrop = new Set<string>();
      const kept = new Set<string>();
      // Absent at the last look: not deleted by this gc, so not counted as its deletion.
      const goneAlready = new Set<string>();
      await mapLimited(orphanBlobs, limit, async (name) => {
        const parsed = parseBlobObjectName(name)!;
        const entryName = entryObjectName(parsed.key, parsed.blobSha256);
        await this.transport.deleteObject(name, async () => {
          kept.delete(name);
          keptForDrop.delete(name);
          goneAlready.delete(name);
          young.delete(name);
          const { outcome } = await checkBlobDeletable(this.transport, entryName, undefined, minAgeMs);
          if (outcome === 'deletable') return true;
          if (outcome === 'gone') goneAlready.add(name);
          else kept.add(name);
          if (outcome === 'intent-held') keptForDrop.add(name);
          if (outcome === 'young') young.add(name);
          return false;
        });
      });
      keptUnderDrop += keptForDrop.size;
      for (const name of kept) {
        orphanBytes -= orphanSizes.get(name)!;
        if (!young.has(name)) continue;
        keptYoung.orphanBlobs++;
        keptYoung.orphanBytes += orphanSizes.get(name)!;
      }
      for (const name of goneAlready) orphanBytes -= orphanSizes.get(name)!;
      orphanBlobs = orphanBlobs.filter((name) => !kept.has(name) && !goneAlready.has(name));
      // Likewise for stamp objects: the slice may have been bound to their key again, and the stamp
      // written again, since the listing. Looked at again before each attempt: the object's age,
      // and its slice's aliases and the key's entry objects (a superseded stamp: whether it was
      // written again since it was listed, however old that write is: a reader checked that version
      // again, so it is the newest now).
      const keptStamps = await this.deleteUnlessKept(orphanStamps, async (name, head) => {
        if (youngNow(name, head)) return true;
        const listedMs = supersededStamps.get(name);
        if (listedMs !== undefined) return !sameSecond(head.lastModifiedMs, listedMs);
        const parsed = parseStampObjectName(name)!;
        // The entry objects, then the intents (a drop PUTs its intent before its entry DELETE), then
        // the entry objects again (a drop may put one back and remove its intent between the two).
        const [aliases, entries] = await Promise.all([this.transport.list(sliceDirName(parsed.slice)), this.transport.list(`${ENTRIES_DIR}${parsed.key}.`)]);
        // The format after that listing, then the stamps (a beside binding's stamp is PUT before its alias).
        const perFileNow = perFile || (await formatNow());
        const stamps = perFileNow ? await this.transport.list(stampDirName(parsed.slice)) : [];
        const hasEntry = entries.some((o) => parseEntryObjectName(o.name)?.key === parsed.key) || (await this.hasIntentOrEntryAgain(parsed.key));
        // Format 2: the slice's bindings as listed now; other keys' entries are taken as there (the look is for this key).
        if (!perFileNow) return stampLives(parsed.key, topAliasKeys(aliases.map((o) => o.name)).get(sliceId(...parsed.slice))?.keys, hasEntry);
        // Other keys: what binds as gc's listing showed it (an entry object or an intent), this key as looked at now.
        const set = deriveS3SliceBindings(aliases, stamps, (key) => (key === parsed.key ? hasEntry : entryKeys.has(key) || intentKeys.has(key))).get(sliceId(...parsed.slice));
        return hasEntry && holdsStampObject(set, parsed.key, parsed.stamp);
      });
      orphanStamps = orphanStamps.filter((name) => !keptStamps.has(name));
      for (const name of keptStamps) if (young.has(name)) keptYoung.orphanStamps++;
      // Alias objects: looked at again before each attempt (the object's age, its slice's aliases
      // and the key's entry objects): kept where it is at its slice's top epoch now (the objects
      // above it went) or its key has an entry object again (a writer stored it again).
      const keptAliases = await this.deleteUnlessKept(orphanAliases, async (name, head) => {
        if (youngNow(name, head)) return true;
        const parsed = parseSliceObjectName(name)!;
        const [aliases, entries] = await Promise.all([this.transport.list(sliceDirName(parsed.slice)), this.transport.list(`${ENTRIES_DIR}${parsed.key}.`)]);
        const top = topAliasKeys(aliases.map((o) => o.name)).get(sliceId(...parsed.slice))?.epoch;
        // Then the key's intents and its entry objects again, as for stamps.
        return !aliasShadowed(parsed, top) || entries.some((o) => parseEntryObjectName(o.name)?.key === parsed.key) || (await this.hasIntentOrEntryAgain(parsed.key));
      });
      orphanAliases = orphanAliases.filter((name) => !keptAliases.has(name));
      for (const name of keptAliases) if (young.has(name)) keptYoung.orphanAliases++;
      await mapLimited(staleUploads, limit, (u) => this.transport.abortMultipartUpload(u.name, u.uploadId));
      // A killed drop's intents: resolved as its own steps would have (entry back if bound, else its blob).
      // After gc's deletions: a failure here is reported with them, not thrown over them.
      let resolved: StaleIntentOutcome;
      try {
        resolved = await resolveStaleDropIntents(this.transport, minAgeMs, MAX_ENTRY_OBJECT_BYTES, perFile || formatNow);
      } catch (error) {
        resolved = { resolved: [], restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: [], restoreConflicts: [], entriesLost: [], error: resolutionErrorOf(error) };
      }
      staleDropIntents = resolved.resolved;
      staleDropResolution = staleDropResolutionOf(resolved);
    }
    return {
      dryRun: options.dryRun === true,
      orphanBlobs,
      orphanBytes,
      tempFiles: staleUploads.map((u) => `${u.name} (multipart upload ${u.uploadId})`),
      oldJournals: [],
      staleLocks: [],
      unknownFiles,
      orphanStamps,
      orphanAliases,
      keptYoung,
      keptUnderDrop,
      staleDropIntents,
      ...(staleDropResolution === undefined ? {} : { staleDropResolution }),
      durationMs: performance.now() - started,
    };
  }

  /**
   * Deletes objects gc found orphaned, bounded in concurrency, each looked at again just before
   * every DELETE attempt (a retried DELETE acts on what was seen just before it, not before the
   * first): gone already, or `keep(name, head)` says a writer made it live again since the listing.
   * Returns the names kept.
   */
  private async deleteUnlessKept(names: readonly string[], keep: (name: string, head: HeadedObject) => Promise<boolean>): Promise<Set<string>> {
    const kept = new Set<string>();
    await mapLimited(names, this.transport.settings.maxConcurrentRequests, async (name) => {
      await this.transport.deleteObject(name, async () => {
        const head = await this.transport.headObject(name);
        if (head === undefined) return false;
        if (!(await keep(name, head))) return true;
        kept.add(name);
        return false;
      });
    });
    return kept;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await Promise.allSettled([this.running, this.queued]);
    await this.entryCopies?.settle();
    this.transport.destroy();
  }
}
