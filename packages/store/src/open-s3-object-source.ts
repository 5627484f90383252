import { StoreError } from './errors.js';
import { resolveS3Settings } from './open-cache-store.js';
import { isS3Url, parseS3Url } from './s3-layout.js';
import { S3Transport } from './s3-transport.js';
import type { S3StoreOptions } from './types.js';

/**
 * Far above any real listing of a model directory (shards + index + configs); bounds memory spent
 * on a hostile or mistaken prefix (a bucket root holding millions of objects).
 */
export const MAX_SOURCE_LISTED_OBJECTS = 100_000;

/** One object of an S3 prefix, opened for positioned reads. */
export interface S3Object {
  /** `s3://bucket/prefix/name`. */
  readonly url: string;
  /** The object's size when it was opened (HeadObject); every later read checks the object still has it. */
  readonly sizeBytes: number;
  /**
   * Fills all of `target` with bytes [offsetBytes, offsetBytes + target.length): ranged GETs of
   * `partSizeBytes` in parallel, retried and resumed like the store's blob reads. `OBJECT_CHANGED`
   * when the range runs past `sizeBytes` or the object no longer has that size, `OBJECT_MISSING`
   * when it was deleted, `S3_UNAVAILABLE` (retryable) when the server stays down.
   */
  readInto(offsetBytes: number, target: Uint8Array): Promise<void>;
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
  /** Releases the client's sockets. Idempotent; later calls throw STORE_CLOSED. */
  close(): void;
}

/**
 * Opens the objects below `s3://bucket/prefix` for ranged reads through the store's own S3
 * transport (bounded retries with backoff, `maxConcurrentRequests` in flight, resumable ranged
 * GETs, typed errors naming the endpoint), so no other package writes S3 code. Settings and
 * configuration as `openCacheStore`'s `options.s3` (`readThroughDir`, `createBucket` and
 * `multipartThresholdBytes` do not apply).
 */
export function openS3ObjectSource(prefixUrl: string, options: S3StoreOptions = {}): S3ObjectSource {
  if (!isS3Url(prefixUrl)) throw new StoreError('INVALID_ARGUMENT', 'an object source is an s3://bucket/prefix URL', { path: String(prefixUrl) });
  const location = parseS3Url(prefixUrl);
  const settings = resolveS3Settings(options);
  const transport = new S3Transport(options, location, settings);
  let closed = false;
  // Sizes from the latest listing: opening a listed object needs no HeadObject round trip.
  let listedSizes = new Map<string, number>();
  const checkOpen = () => {
    if (closed) throw new StoreError('STORE_CLOSED', 'the object source is closed', { path: location.url });
  };
  return {
    url: location.url,
    async list() {
      checkOpen();
      const listed = await transport.list('');
      if (listed.length > MAX_SOURCE_LISTED_OBJECTS) {
        throw new StoreError('SIZE_INVALID', `more than MAX_SOURCE_LISTED_OBJECTS (${MAX_SOURCE_LISTED_OBJECTS}) objects below the prefix`, { path: location.url });
      }
      listedSizes = new Map(listed.map((object) => [object.name, object.sizeBytes]));
      return listed.map((object) => object.name).sort();
    },
    async open(name) {
      checkOpen();
      if (typeof name !== 'string' || name.length === 0) throw new StoreError('INVALID_ARGUMENT', 'an object name is a non-empty string', { path: location.url });
      // A listed size of 0 may be a server that left Size out: ask.
      const listed = listedSizes.get(name);
      const sizeBytes = listed !== undefined && listed > 0 ? listed : await transport.headObjectSize(name);
      if (sizeBytes === undefined) return undefined;
      const url = transport.describe(name);
      return {
        url,
        sizeBytes,
        async readInto(offsetBytes, target) {
          checkOpen();
          // Overflow-safe: both are checked as safe integers before adding.
          if (!Number.isSafeInteger(offsetBytes) || offsetBytes < 0 || !(target instanceof Uint8Array) || offsetBytes + target.length > sizeBytes) {
            throw new StoreError('OBJECT_CHANGED', `range ${offsetBytes}+${target?.length} runs past the ${sizeBytes}-byte object`, {
              path: url,
              details: { offsetBytes, lengthBytes: target?.length, sizeBytes },
            });
          }
          try {
            await transport.getRangeOf(name, target, offsetBytes, sizeBytes, name);
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
        },
      };
    },
    close() {
      if (closed) return;
      closed = true;
      transport.destroy();
    },
  };
}

/** `s3://bucket/key` as one object: `openS3ObjectSource` of its directory, then `open` of its name. OBJECT_MISSING when absent. */
export async function openS3Object(url: string, options: S3StoreOptions = {}): Promise<S3Object & { close(): void }> {
  if (!isS3Url(url) || url.endsWith('/')) throw new StoreError('INVALID_ARGUMENT', 'an object URL is s3://bucket/key (not ending with /)', { path: String(url) });
  const slash = url.lastIndexOf('/');
  const source = openS3ObjectSource(url.slice(0, slash + 1), options);
  try {
    const object = await source.open(url.slice(slash + 1));
    if (object === undefined) throw new StoreError('OBJECT_MISSING', 'the object does not exist', { path: url });
    return { url: object.url, sizeBytes: object.sizeBytes, readInto: (offsetBytes, target) => object.readInto(offsetBytes, target), close: () => source.close() };
  } catch (error) {
    source.close();
    throw error;
  }
}
