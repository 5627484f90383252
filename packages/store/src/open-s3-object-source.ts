import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkS3Options } from './check-options.js';
import { StoreError, isStoreError } from './errors.js';
import { resolveS3Settings } from './open-cache-store.js';
import { ReadThroughCache } from './read-through-cache.js';
import { MAX_READ_THROUGH_RANGE_BYTES, ReadThroughRanges, type RangeIdentity, type ReadThroughRangeStats } from './read-through-ranges.js';
import { plainMd5Etag } from './s3-cache-store.js';
import { isS3Url, parseS3Url } from './s3-layout.js';
import { normalizeEtag } from './normalize-etag.js';
import { S3Transport, type HeadedObject } from './s3-transport.js';
import { countTransitDamage, reportTransitDamage } from './transit-damage.js';
import type { S3StoreOptions } from './types.js';

/**
 * Far above any real listing of a model directory (shards + index + configs); bounds memory spent
 * on a hostile or mistaken prefix (a bucket root holding millions of objects).
 */
export const MAX_SOURCE_LISTED_OBJECTS = 100_000;

/**
 * How long after a GET said an opened object is gone (404) or changed (412, another ETag or size)
 * its HeadObject looks again before that is believed. One such answer can be a lagging replica or
 * a flaky proxy, and it ended a whole model load: an object the HEAD finds with the opened ETag and
 * size is read once more (If-Match still binds every byte to that version). Long enough for a
 * proxy's or replica's blip to pass, short beside the load it saves. Once per read, never a loop.
 */
export const OBJECT_CONFIRM_DELAY_MS = 500;

/** One object of an S3 prefix, opened for positioned reads. */
export interface S3Object {
  /** `s3://bucket/prefix/name`. */
  readonly url: string;
  /** The object's size when it was opened (LIST or HeadObject); every later read checks the object still has it. */
  readonly sizeBytes: number;
  /**
   * The object's ETag when it was opened (LIST or HeadObject, quotes included); undefined when the
   * server gave none. Every GET of a read sends it as If-Match, so all the bytes come from that version.
   */
  readonly etag: string | undefined;
  /**
   * Fills all of `target` with bytes [offsetBytes, offsetBytes + target.length): ranged GETs of
   * `partSizeBytes` in parallel, retried and resumed like the store's blob reads. `OBJECT_CHANGED`
   * when the range runs past `sizeBytes`, the object no longer has that size or no longer has
   * `etag` (412), `OBJECT_MISSING` when it was deleted, `S3_UNAVAILABLE` (retryable) when the server
   * stays down. A GET's 404 or 412 (or another ETag) is believed only once a HeadObject
   * OBJECT_CONFIRM_DELAY_MS later agrees; when it finds the opened version, the read is made once
   * more. With a read-through directory, a verified local copy of exactly this range of this
   * version (URL, ETag, size) is served instead, and a fetched range is kept (see openS3ObjectSource).
   */
  readInto(offsetBytes: number, target: Uint8Array): Promise<void>;
  /**
   * Drops this host's read-through copy of exactly the range [offsetBytes, offsetBytes + lengthBytes)
   * (after its write, if one is still running), so the next read of it fetches from the object
   * store. For a reader that found the range's bytes wrong by a check of its own (a content key, a
   * parse): the copy's digest only proves they are what a GET returned. Never rejects; nothing to do
   * without a read-through directory.
   */
  dropLocalCopy(offsetBytes: number, lengthBytes: number): Promise<void>;
  /**
   * A read of the range gave damaged bytes (two reads of it differed, or the read after a
   * dropLocalCopy gave what the reader's check wanted): the bad read is the one before the range's
   * latest dropLocalCopy, else its latest read. Served from a local copy (kept by an earlier source),
   * the copies were to blame: every copy this source served is dropped, and it serves none from now
   * on (the endpoint is not blamed); fetched by this source, a body was damaged on the way: the
   * source's reportDamage. A range's current copy is otherwise not dropped here (dropLocalCopy is).
   * Never rejects.
   */
  reportDamage(offsetBytes: number, lengthBytes: number): Promise<void>;
}

/** Positioned reads of the objects below one `s3://bucket/prefix`, sharing one client, retries and concurrency cap. */
export interface S3ObjectSource {
  /** `s3://bucket/prefix/` (always ends with `/`). */
  readonly url: string;
  /** Names (relative to the prefix) of every object below it, sorted (one paged LIST; their sizes are kept for `open`). */
  list(): Promise<string[]>;
  /**
   * `name` (relative to the prefix) opened for reads: its size from this source's latest `list()`
   * when that listed it (no request), else a HeadObject; undefined when it does not exist. Either
   * way every read checks the object still has that size, so a stale listing fails the read
   * (OBJECT_CHANGED / OBJECT_MISSING) and never serves other bytes.
   */
  open(name: string): Promise<S3Object | undefined>;
  /** Counters of the read-through directory's raw ranges; undefined without `readThroughDir`. */
  readThroughStats(): ReadThroughRangeStats | undefined;
  /**
   * Bytes this source returned were found damaged by the caller (an index that parsed only when its
   * ranges were dropped and read again): unless every range dropped (dropLocalCopy) since the last
   * report had been fetched by this source, the local copies it served are dropped and it serves no
   * more (as reportDamage of a range served from a copy); unless every one had been served from a
   * copy, noted against the endpoint (reportTransitDamage), the read-through ranges this source kept
   * are dropped, and no more are kept while it is open (`readThroughStats().distrusted`). No range
   * dropped since the last report: both. Never rejects.
   */
  reportDamage(): Promise<void>;
  /**
   * Releases the client's sockets at once; the promise settles (never rejects) when the local copies
   * still being written have been. Idempotent; later calls of the other methods throw STORE_CLOSED.
   */
  close(): Promise<void>;
}

/**
 * Opens the objects below `s3://bucket/prefix` for ranged reads through the store's own S3
 * transport (bounded retries with backoff, `maxConcurrentRequests` in flight, resumable ranged
 * GETs, typed errors naming the endpoint), so no other package writes S3 code. Settings and
 * configuration as `openCacheStore`'s `options.s3` (`createBucket` and `multipartThresholdBytes`
 * do not apply).
 *
 * `readThroughDir` (the per-host directory a cache's blobs go to; one directory may serve both):
 * each range read of an object that has an ETag, up to MAX_READ_THROUGH_RANGE_BYTES, is first looked
 * up as a local file named by the hash of (bucket, key, ETag, size, offset, length) and
 * served only when its SHA-256 matches the digest it carries (else removed and fetched). A fetched
 * range is written there atomically after the read, in the background; a write that fails (full
 * disk, read-only directory) is counted in `readThroughStats()` and never fails the read. That
 * digest is taken of the bytes as they came: a GET body damaged in transit would be kept and served
 * again, so a whole object with a single-part (MD5) ETag is kept only when its MD5 matches (else
 * fetched once more), and a reader that finds a range wrong calls `dropLocalCopy`. A body found
 * damaged (a whole object not its MD5 that then was, a reader's reportDamage, or any body from the
 * same endpoint in this process: reportTransitDamage) distrusts the source: the ranges it kept are
 * dropped and no more are kept while it is open (ranges fetched unchecked came the same way).
 * A local copy found damaged (a reader's reportDamage of a range served from one, a whole object's
 * copy not its MD5 when the fetched body is) makes every copy the source served suspect (kept by the
 * same earlier GETs): they are dropped, and later reads fetch (and keep) instead of serving copies.
 * That blames no endpoint: the damage came with an earlier source's GET, maybe of another process or
 * endpoint name (copies are shared), and says nothing of the bodies this source fetches.
 */
export function openS3ObjectSource(prefixUrl: string, options: S3StoreOptions = {}): S3ObjectSource {
  if (!isS3Url(prefixUrl)) throw new StoreError('INVALID_ARGUMENT', 'an object source is an s3://bucket/prefix URL', { path: String(prefixUrl) });
  checkS3Options(options, 'openS3ObjectSource', 'options');
  const location = parseS3Url(prefixUrl);
  const settings = resolveS3Settings(options);
  const transport = new S3Transport(options, location, settings);
  const ranges = options.readThroughDir ? new ReadThroughRanges(new ReadThroughCache(options.readThroughDir)) : undefined;
  const damageAtOpen = countTransitDamage(transport.endpoint);
  /** Ranges are distrusted once a body from this endpoint was found damaged since the source was opened. */
  const distrustIfDamageSeen = async (): Promise<void> => {
    if (ranges !== undefined && !ranges.distrusted && countTransitDamage(transport.endpoint) > damageAtOpen) await ranges.distrust();
  };
  const reportDamage = async (): Promise<void> => {
    reportTransitDamage(transport.endpoint);
    await distrustIfDamageSeen();
  };
  // Whether a bad read came from an earlier source's copy or from this source's GET: ranges (object,
  // offset, length) whose latest read was a local copy, and what each range's latest drop found.
  // One short entry per range read (a model's tensors: thousands), for the source's lifetime.
  const servedFromCopy = new Set<string>();
  const droppedFrom = new Map<string, 'copy' | 'fetched'>();
  // The copies this source served and has not dropped. One found damaged makes the others suspect:
  // the same earlier loads' GETs wrote them, and nothing checks a raw range. Set once: the served
  // copies are dropped, and no copy is served from then on.
  const servedCopies = new Map<string, RangeIdentity>();
  let copiesSuspect: Promise<void> | undefined;
  const dropServedCopies = (): Promise<void> => {
    copiesSuspect ??= (async () => {
      const suspect = [...servedCopies.values()];
      servedCopies.clear();
      if (ranges !== undefined) await Promise.all(suspect.map((identity) => ranges.drop(identity)));
    })();
    return copiesSuspect;
  };
  const rangeId = (name: string, offsetBytes: number, lengthBytes: number) => JSON.stringify([name, offsetBytes, lengthBytes]);
  let closed: Promise<void> | undefined;
  // Sizes and ETags from the latest listing: opening a listed object needs no HeadObject round trip.
  let listedObjects = new Map<string, { sizeBytes: number; etag: string | undefined }>();
  const checkOpen = () => {
    if (closed !== undefined) throw new StoreError('STORE_CLOSED', 'the object source is closed', { path: location.url });
  };
  return {
    url: location.url,
    async list() {
      checkOpen();
      const listed = await transport.list('');
      if (listed.length > MAX_SOURCE_LISTED_OBJECTS) {
        throw new StoreError('SIZE_INVALID', `more than MAX_SOURCE_LISTED_OBJECTS (${MAX_SOURCE_LISTED_OBJECTS}) objects below the prefix`, { path: location.url });
      }
      listedObjects = new Map(listed.map((object) => [object.name, { sizeBytes: object.sizeBytes, etag: object.etag }]));
      return listed.map((object) => object.name).sort();
    },
    async open(name) {
      checkOpen();
      if (typeof name !== 'string' || name.length === 0) throw new StoreError('INVALID_ARGUMENT', 'an object name is a non-empty string', { path: location.url });
      // A listed size of 0 or no ETag may be a server that left them out: ask.
      const listed = listedObjects.get(name);
      const known = listed !== undefined && listed.sizeBytes > 0 && listed.etag !== undefined ? listed : await transport.headObject(name);
      if (known === undefined) return undefined;
      const { sizeBytes, etag } = known;
      const url = transport.describe(name);
      const wholeMd5 = plainMd5Etag(etag);
      const identityOf = (offsetBytes: number, lengthBytes: number): RangeIdentity | undefined => {
        if (ranges === undefined || !ranges.accepts(lengthBytes)) return undefined;
        // Without an ETag a replaced object of the same size could not be told apart: never kept.
        if (etag === undefined) {
          ranges.countBypassed();
          return undefined;
        }
        return { bucket: location.bucket, key: `${location.prefix}${name}`, etag, sizeBytes, offsetBytes, lengthBytes };
      };
      const fetchOnce = async (offsetBytes: number, target: Uint8Array): Promise<void> => {
        try {
          await transport.getRangeOf(name, target, offsetBytes, sizeBytes, name, etag);
        } catch (error) {
          if (error instanceof StoreError && error.code === 'BLOB_MISSING') {
            throw new StoreError('OBJECT_MISSING', 'the object no longer exists', { path: url, cause: error });
          }
          if (error instanceof StoreError && error.code === 'BLOB_SIZE_MISMATCH') {
            throw new StoreError('OBJECT_CHANGED', `the object is no longer ${sizeBytes} bytes long (replaced since it was opened?)`, {
              path: url,
              details: { ...error.details, sizeBytes },
              cause: error,
            });
          }
          throw error;
        }
      };
      const dropLocalCopy = async (offsetBytes: number, lengthBytes: number): Promise<void> => {
        const id = rangeId(name, offsetBytes, lengthBytes);
        droppedFrom.set(id, servedFromCopy.has(id) ? 'copy' : 'fetched');
        servedCopies.delete(id); // dropped just below
        // Only ranges readInto keeps have a copy (no counters moved: nothing is read).
        const kept = Number.isSafeInteger(offsetBytes) && offsetBytes >= 0 && Number.isSafeInteger(lengthBytes) && lengthBytes > 0 && lengthBytes <= MAX_READ_THROUGH_RANGE_BYTES;
        if (ranges === undefined || etag === undefined || !kept) return;
        await ranges.drop({ bucket: location.bucket, key: `${location.prefix}${name}`, etag, sizeBytes, offsetBytes, lengthBytes });
      };
      // One HeadObject at a time per object: reads failing together on one blip share it.
      let confirming: Promise<HeadedObject | undefined> | undefined;
      const confirmObject = (): Promise<HeadedObject | undefined> => {
        confirming ??= (async () => {
          await sleep(OBJECT_CONFIRM_DELAY_MS, undefined, options.signal ? { signal: options.signal } : undefined).catch(() => undefined);
          return transport.headObject(name); // ABORTED at once when the caller's signal fired
        })().finally(() => {
          confirming = undefined;
        });
        return confirming;
      };
      const fetchRange = async (offsetBytes: number, target: Uint8Array): Promise<void> => {
        try {
          await fetchOnce(offsetBytes, target);
          return;
        } catch (error) {
          // Without an ETag no If-Match would bind a second read to the version of the first: believed.
          if (etag === undefined || !(isStoreError(error, 'OBJECT_MISSING') || isStoreError(error, 'OBJECT_CHANGED'))) throw error;
          const head = await confirmObject();
          if (head === undefined) {
            if (error.code === 'OBJECT_MISSING') throw error;
            throw new StoreError('OBJECT_MISSING', `the object no longer exists (a GET said: ${error.message})`, { path: url, cause: error });
          }
          if (head.etag === undefined || normalizeEtag(head.etag) !== normalizeEtag(etag) || (head.sizeKnown && head.sizeBytes !== sizeBytes)) {
            if (error.code === 'OBJECT_CHANGED') throw error;
            throw new StoreError('OBJECT_CHANGED', `the object was replaced since it was opened (a GET answered 404; HeadObject now gives ETag ${String(head.etag)}, ${head.sizeBytes} bytes)`, {
              path: url,
              details: { etag, sizeBytes, got: head.etag, gotSizeBytes: head.sizeBytes },
              cause: error,
            });
          }
        }
        // The opened version is there: that answer was a blip. Read once more; what fails now is reported.
        await fetchOnce(offsetBytes, target);
      };
      return {
        url,
        sizeBytes,
        etag,
        async readInto(offsetBytes, target) {
          checkOpen();
          // Overflow-safe: both are checked as safe integers before adding.
          if (!Number.isSafeInteger(offsetBytes) || offsetBytes < 0 || !(target instanceof Uint8Array) || offsetBytes + target.length > sizeBytes) {
            throw new StoreError('OBJECT_CHANGED', `range ${offsetBytes}+${target?.length} runs past the ${sizeBytes}-byte object`, {
              path: url,
              details: { offsetBytes, lengthBytes: target?.length, sizeBytes },
            });
          }
          const identity = identityOf(offsetBytes, target.length);
          // The whole object (an index, a small shard): its ETag's MD5 judges the bytes, copied or fetched. Ranges of it, nothing can.
          const isNotObject = (bytes: Uint8Array) => wholeMd5 !== undefined && offsetBytes === 0 && bytes.length === sizeBytes && md5Hex(bytes) !== wholeMd5;
          const id = rangeId(name, offsetBytes, target.length);
          let copyNotObject = false;
          // Once a copy proved damaged, the others are suspect: fetched instead (the fetched body is kept over the copy).
          if (identity !== undefined && ranges !== undefined && copiesSuspect === undefined && (await ranges.readInto(identity, target))) {
            copyNotObject = isNotObject(target);
            if (!copyNotObject && copiesSuspect === undefined) {
              servedFromCopy.add(id);
              servedCopies.set(id, identity);
              return;
            }
            // Not the object: kept before copies were checked so (an earlier source's fault: this one's bodies are
            // not blamed). Or found suspect while it was read: not served.
            await ranges.drop(identity);
          }
          servedFromCopy.delete(id);
          servedCopies.delete(id);
          await fetchRange(offsetBytes, target);
          if (identity === undefined || ranges === undefined) return;
          if (isNotObject(target)) {
            await fetchRange(offsetBytes, target);
            // Twice not its MD5: served (an ETag of an encrypted object, SSE-KMS or SSE-C, is no MD5 of its bytes), never kept.
            if (isNotObject(target)) return;
            // Its MD5 the second time: the first body was damaged on the way, and so may be any other.
            await reportDamage();
          }
          // A copy not the object whose fetched body is: that copy was damaged, and so may be the others served.
          if (copyNotObject) await dropServedCopies();
          await distrustIfDamageSeen();
          await ranges.keep(identity, target);
        },
        dropLocalCopy,
        async reportDamage(offsetBytes, lengthBytes) {
          const id = rangeId(name, offsetBytes, lengthBytes);
          const bad = droppedFrom.get(id) ?? (servedFromCopy.has(id) ? 'copy' : 'fetched');
          droppedFrom.delete(id);
          await (bad === 'fetched' ? reportDamage() : dropServedCopies());
        },
      };
    },
    readThroughStats: () => ranges?.stats(),
    async reportDamage() {
      // Which dropped range was the bad one is not said: each kind among them is suspect (none dropped: both).
      const from = new Set(droppedFrom.values());
      droppedFrom.clear();
      if (from.size === 0 || from.has('copy')) await dropServedCopies();
      if (from.size === 0 || from.has('fetched')) await reportDamage();
    },
    close() {
      if (closed) return closed;
      transport.destroy();
      // Damage seen on the endpoint after this source's last keep drops its ranges all the same.
      closed = ranges === undefined ? Promise.resolve() : Promise.all([distrustIfDamageSeen(), copiesSuspect]).then(() => ranges.settle());
      return closed;
    },
  };
}

function md5Hex(bytes: Uint8Array): string {
  return createHash('md5').update(bytes).digest('hex');
}

/** `s3://bucket/key` as one object: `openS3ObjectSource` of its directory, then `open` of its name. OBJECT_MISSING when absent. */
export async function openS3Object(url: string, options: S3StoreOptions = {}): Promise<S3Object & { close(): Promise<void> }> {
  if (!isS3Url(url) || url.endsWith('/')) throw new StoreError('INVALID_ARGUMENT', 'an object URL is s3://bucket/key (not ending with /)', { path: String(url) });
  const slash = url.lastIndexOf('/');
  const source = openS3ObjectSource(url.slice(0, slash + 1), options);
  try {
    const object = await source.open(url.slice(slash + 1));
    if (object === undefined) throw new StoreError('OBJECT_MISSING', 'the object does not exist', { path: url });
    return {
      url: object.url,
      sizeBytes: object.sizeBytes,
      etag: object.etag,
      readInto: (offsetBytes, target) => object.readInto(offsetBytes, target),
      dropLocalCopy: (offsetBytes, lengthBytes) => object.dropLocalCopy(offsetBytes, lengthBytes),
      reportDamage: (offsetBytes, lengthBytes) => object.reportDamage(offsetBytes, lengthBytes),
      close: () => source.close(),
    };
  } catch (error) {
    await source.close();
    throw error;
  }
}
