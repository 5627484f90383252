import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { S3Client } from '@aws-sdk/client-s3';
import { StoreError, isStoreError } from './errors.js';
import { formatAge } from './format-age.js';
import { updateHash } from './hash-bytes.js';
import { isSdkMissing, loadS3Sdk, S3_SDK_INSTALL_COMMAND, type S3Sdk } from './load-s3-sdk.js';
import { normalizeEtag } from './normalize-etag.js';
import type { S3Location } from './s3-layout.js';
import type { S3StoreOptions } from './types.js';

/** Bounds memory spent on a hostile bucket listing (far above MAX_ENTRIES plus their aliases). */
export const MAX_LISTED_OBJECTS = 50_000_000;
/** Empty pages in a row that a truncated listing may return before it is judged stuck (S3 may return a few; never thousands). */
export const MAX_EMPTY_LIST_PAGES = 100;
/** S3's own limit on one part (and on a single PUT). */
const MAX_PART_BYTES = 5 * 2 ** 30;
const MIN_PART_BYTES = 5 * 2 ** 20;
/**
 * Attempts in a row of one request that got no reply at all (no connection, or no response headers
 * within the socket idle timeout) before the endpoint is judged dead: S3_UNAVAILABLE. An endpoint
 * that accepts connections and never answers held verify and open ~200 s in silence (maxAttempts of
 * 30 s each); this ends them within 2 x requestTimeoutMs (~60 s by default). A reply that arrives
 * slowly (headers, then a trickling body) is not silent and keeps every attempt, and so does every
 * request of a transport whose endpoint has answered once (a silent spell of a live endpoint, a
 * failover, is ridden out on maxAttempts, as a long build needs).
 */
export const MAX_SILENT_ATTEMPTS = 2;
/** How long a failed or aborted multipart upload waits for its AbortMultipartUpload (what is left, gc cleans). */
export const MULTIPART_CLEANUP_DEADLINE_MS = 3_000;

export interface ListedObject {
  /** Relative to the cache prefix. */
  name: string;
  sizeBytes: number;
  lastModifiedMs: number;
  /** The object's ETag as the listing gave it (quotes included), when it gave one: names this version of the object. */
  etag: string | undefined;
}

/** What HeadObject says of an object. */
export interface HeadedObject {
  /** Content-Length (0 when the server sent none: see sizeKnown). */
  sizeBytes: number;
  /** False when the reply had no Content-Length (some S3-compatible servers and proxies). */
  sizeKnown: boolean;
  /** As the server sent it (quotes included); undefined when it sent none. */
  etag: string | undefined;
  /** Last-Modified (0 when the server sent none). */
  lastModifiedMs: number;
}

export interface ResolvedS3Settings {
  maxConcurrentRequests: number;
  partSizeBytes: number;
  multipartThresholdBytes: number;
  maxAttempts: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  requestDeadlineMs: number;
}

const TRANSIENT_ERRNO = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  // An unresolvable endpoint host, like a refused connection: a DNS server or a gateway's name may
  // come back (a restarting container, a flapping resolver), and the endpoint is named either way.
  'ENOTFOUND',
  'ERR_STREAM_PREMATURE_CLOSE',
  'UND_ERR_SOCKET',
]);
const TRANSIENT_NAMES = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'InternalError',
  'ServiceUnavailable',
  'BodyInterrupted',
  'BodyStalled',
  'ObjectNotFoundYet',
]);

function errnoOf(error: unknown): string | undefined {
  let e = error as { code?: unknown; cause?: unknown; errors?: unknown[] } | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (typeof e.code === 'string') return e.code;
    // Node's happy-eyeballs connect reports an AggregateError of per-address errors.
    if (Array.isArray(e.errors) && e.errors.length > 0) return errnoOf(e.errors[0]);
    e = e.cause as typeof e;
  }
  return undefined;
}

function statusOf(error: unknown): number | undefined {
  const status = (error as { $metadata?: { httpStatusCode?: unknown } } | undefined)?.$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

/**
 * A 2xx reply whose body the SDK could not parse (a LIST's XML cut short or garbled on the way: the
 * SDK's deserializer marks its error with the hidden `$response`). The server said it succeeded;
 * the bytes did not arrive intact, so another attempt may.
 */
function isUndecodableReply(error: unknown): boolean {
  if (error === null || typeof error !== 'object' || !('$response' in error)) return false;
  const status = statusOf(error);
  return status !== undefined && status >= 200 && status < 300;
}

/** Connection resets and refusals, timeouts, 5xx, 408/429, throttling and 2xx replies that do not parse: worth another attempt. */
export function isTransientS3Error(error: unknown): boolean {
  if (error instanceof StoreError) return false;
  const status = statusOf(error);
  if (status !== undefined && (status >= 500 || status === 408 || status === 429)) return true;
  if (isUndecodableReply(error)) return true;
  const name = (error as { name?: unknown } | undefined)?.name;
  if (typeof name === 'string' && TRANSIENT_NAMES.has(name)) return true;
  const errno = errnoOf(error);
  if (errno !== undefined && TRANSIENT_ERRNO.has(errno)) return true;
  const message = String((error as { message?: unknown } | undefined)?.message ?? '');
  // Responses cut off by a dying server surface from node:http with these messages and no code.
  return /socket hang up|aborted|premature close|other side closed|ECONNRESET|ECONNREFUSED/i.test(message);
}

function isPreconditionFailed(error: unknown): boolean {
  const name = (error as { name?: unknown } | undefined)?.name;
  // 412: the object exists. 409 ConditionalRequestConflict (AWS): another conditional write of it is in progress.
  return statusOf(error) === 412 || statusOf(error) === 409 || name === 'PreconditionFailed' || name === 'ConditionalRequestConflict';
}

function isNotImplemented(error: unknown): boolean {
  return statusOf(error) === 501 || (error as { name?: unknown } | undefined)?.name === 'NotImplemented';
}

/** A 404 of an object that must exist (a conditional create was just refused for it): retried, as a lagging replica. */
class ObjectNotFoundYet extends Error {
  override readonly name = 'ObjectNotFoundYet';
}

/**
 * The SDK's connect or socket-idle timeout before any response (its request promise rejects with
 * TimeoutError only until the headers arrive; a body stalled later fails as a reset stream).
 */
function isSilentAttempt(error: unknown): boolean {
  return (error as { name?: unknown } | undefined)?.name === 'TimeoutError' && statusOf(error) === undefined;
}

/**
 * Whether a failed attempt still shows the endpoint answering: an HTTP status, or a reply whose body
 * broke off or stalled. A refused or reset connection, or a name that did not resolve, shows no
 * server at work (one refusing while its container restarts may then accept and hang).
 */
function isReply(error: unknown): boolean {
  const name = (error as { name?: unknown } | undefined)?.name;
  return statusOf(error) !== undefined || name === 'BodyInterrupted' || name === 'BodyStalled';
}

/**
 * A negative clock offset (this machine's clock ahead of the server's Date) smaller than this is
 * noise, not skew, and not applied to the ages judged (S3Transport.judgingNowMs): the SDK takes a
 * reply's Date header (to the second, rounded down) against this machine's clock on the reply's
 * arrival, so clocks that agree read up to a second and a request's latency below 0. Applied, it
 * made an object written a moment ago look written in the future, younger than a minAgeMs of 0
 * (tests collect at once with allowMinAgeBelowFloorForTests). Not applying it judges by this
 * machine's clock, as before server time was known: an age at most this much longer than the
 * server's clock gives, nothing next to MIN_S3_GC_AGE_MS. A positive offset is never applied.
 */
export const CLOCK_OFFSET_NOISE_MS = 2_000;

/** Whether an object's two Last-Modified readings are one write: to the second (HEAD gives an HTTP date, a listing may give milliseconds). */
export function sameSecond(aMs: number, bMs: number): boolean {
  return Math.floor(aMs / 1000) === Math.floor(bMs / 1000);
}

/**
 * The smallest clock offset at which a code-less 403 the SDK marked clockSkewCorrected is taken for
 * a refused signing time: servers accept 15 min (AWS, Ceph), a minute less for the Date header's
 * resolution and transit.
 */
export const CLOCK_SKEW_MARK_MIN_MS = 14 * 60_000;

/** The S3 codes of a request signed at a time too far from the server's (15 min on AWS). */
const CLOCK_SKEW_NAMES = new Set(['RequestTimeTooSkewed', 'RequestExpired', 'RequestInTheFuture']);

/**
 * A request refused for its signing time (a 403 like a denied one): a wrong clock, not wrong
 * credentials. The SDK corrects its signing clock from that reply's Date header
 * (client.config.systemClockOffset), so one more attempt is signed on the server's time. A reply
 * without a body (HeadObject's: Ceph refuses it as 'Unknown', 403) names no code, but the SDK marks
 * the correction it made from it (`$metadata.clockSkewCorrected`); only a 403 counts: a 404
 * (HeadBucket of a missing bucket) also carries the mark when the clocks differ.
 */
export function isClockSkewError(error: unknown, clockOffsetMs: number): boolean {
  const name = (error as { name?: unknown } | undefined)?.name;
  if (typeof name === 'string' && CLOCK_SKEW_NAMES.has(name)) return true;
  // The SDK marks every reply once the offset is 4 min or more and moved at all (it moves by
  // milliseconds each reply), denied ones too: the mark alone made a real AccessDenied read as a
  // clock problem. Only a reply naming no code, with an offset past what S3 accepts, is one.
  const named = typeof name === 'string' && name !== 'Unknown' && name !== 'UnknownError';
  return (
    !named &&
    statusOf(error) === 403 &&
    Math.abs(clockOffsetMs) >= CLOCK_SKEW_MARK_MIN_MS &&
    (error as { $metadata?: { clockSkewCorrected?: unknown } } | undefined)?.$metadata?.clockSkewCorrected === true
  );
}

/** A clock offset (the server's time minus this machine's) for a message: "2.0 h ahead of the server's". */
export function describeClockOffset(offsetMs: number): string {
  return `${formatAge(Math.abs(offsetMs))} ${offsetMs < 0 ? 'ahead of' : 'behind'} the server's`;
}

function isNotFound(error: unknown): boolean {
  const name = (error as { name?: unknown } | undefined)?.name;
  return statusOf(error) === 404 || name === 'NoSuchKey' || name === 'NotFound';
}

/** The SDK's errors carry the whole HTTP response; keep what explains the failure. */
function summarizeCause(error: unknown): Error {
  const summary = new Error(describeError(error));
  summary.name = typeof (error as { name?: unknown })?.name === 'string' ? (error as Error).name : 'Error';
  Object.assign(summary, { code: errnoOf(error), httpStatusCode: statusOf(error) });
  return summary;
}

function describeError(error: unknown): string {
  const e = error as { name?: unknown; message?: unknown };
  const errno = errnoOf(error);
  const status = statusOf(error);
  return [typeof e?.name === 'string' ? e.name : 'Error', status ? `HTTP ${status}` : '', errno ?? '', String(e?.message ?? '')].filter(Boolean).join(' ');
}

/** What withRetries returns when its `beforeAttempt` check called the request off. */
const SKIPPED: unique symbol = Symbol('skipped');

/** A body that ended or broke before its promised length (retried from where it stopped). */
class BodyInterrupted extends Error {
  override readonly name = 'BodyInterrupted';
}

/**
 * A body that went idle past the socket timeout after its headers arrived (the SDK fails it with
 * the TimeoutError it uses for no reply at all): retried, and not a silent attempt.
 */
class BodyStalled extends Error {
  override readonly name = 'BodyStalled';
}

/** A stream error of a body: its idle timeout as BodyStalled, anything else as it is. */
function bodyError(error: unknown): unknown {
  return (error as { name?: unknown } | undefined)?.name === 'TimeoutError' ? new BodyStalled(String((error as Error).message), { cause: error }) : error;
}

/** Counting semaphore: at most `limit` requests hold a slot. */
class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

/** The Content-MD5 of a PUT body or part (bodies of 2 GiB and more too: updateHash). */
export function md5Base64(bytes: Uint8Array): string {
  return updateHash(createHash('md5'), bytes).digest('base64');
}

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The endpoint a client talks to, for messages. */
export function describeEndpoint(endpoint: string | undefined, region: string): string {
  return endpoint ?? `https://s3.${region}.amazonaws.com`;
}

/** The endpoint a client made from `options` talks to, for messages (no SDK needed). */
export function describeS3Endpoint(options: S3StoreOptions): string {
  if (options.client !== undefined) return describeEndpoint(options.endpoint, options.region ?? process.env.AWS_REGION ?? 'us-east-1');
  return describeEndpoint(endpointOf(options), regionOf(options));
}

// The SDK reads these itself too; we read them to choose path-style and to name the endpoint in errors.
const endpointOf = (options: S3StoreOptions) => options.endpoint ?? process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL ?? undefined;
const regionOf = (options: S3StoreOptions) => options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';

/** The caller's client (`options.client`), or a new one with the store's settings. */
export function createS3Client(sdk: S3Sdk, options: S3StoreOptions, settings: ResolvedS3Settings): S3Client {
  // An S3Client by contract (S3ClientLike only keeps the SDK's types out of the declarations).
  if (options.client !== undefined) return options.client as S3Client;
  const endpoint = endpointOf(options);
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 3_000;
  const agentOptions = { keepAlive: true, maxSockets: settings.maxConcurrentRequests * 2 };
  return new sdk.s3.S3Client({
    region: regionOf(options),
    endpoint,
    forcePathStyle: options.forcePathStyle ?? endpoint !== undefined,
    // The store retries itself (bounded, resumable ranged reads); one SDK attempt per store attempt.
    maxAttempts: 1,
    // Integrity is ours: Content-MD5 on every PUT, payload checksums on every read. The SDK's default
    // trailing CRC32 (aws-chunked) is not understood by every S3 server.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: new sdk.http.NodeHttpHandler({
      connectionTimeout: connectTimeoutMs,
      socketTimeout: requestTimeoutMs,
      httpAgent: new sdk.agents.HttpAgent(agentOptions),
      httpsAgent: new sdk.agents.HttpsAgent(agentOptions),
    }),
  });
}

/**
 * The S3 calls the store makes, each with bounded retries and backoff on transient errors and a
 * bounded number in flight. A request that keeps failing transiently ends in S3_UNAVAILABLE (retryable,
 * naming the endpoint); any other failure is S3_ERROR (or BLOB_MISSING / a caller-visible code).
 */
export class S3Transport {
  private readonly limiter: Limiter;

  /** Set once the SDK is loaded and the client made (the first request waits for it). */
  private session: { client: S3Client; sdk: S3Sdk } | undefined;
  private connecting: Promise<void> | undefined;
  private destroyed = false;
  /** Any reply came (a response, an error response): silence is then a blip, not a dead endpoint. */
  private endpointAnswered = false;

  constructor(
    private readonly options: S3StoreOptions,
    readonly location: S3Location,
    readonly settings: ResolvedS3Settings,
  ) {
    this.limiter = new Limiter(settings.maxConcurrentRequests);
    this.endpoint = describeS3Endpoint(options);
  }

  readonly endpoint: string;

  /** Loads the SDK and makes the client on first use; every request method awaits it first. */
  private connect(): Promise<void> {
    this.connecting ??= loadS3Sdk().then(
      (sdk) => {
        this.session = { client: createS3Client(sdk, this.options, this.settings), sdk };
        if (this.destroyed) this.session.client.destroy();
      },
      (error: unknown) => {
        this.connecting = undefined;
        // An optional peer dependency: say what to install, not only what was not found.
        // A global install of the CLI looks in its own prefix: `npm i` in the current directory does not reach it.
        const advice = isSdkMissing(error) ? `; s3:// needs it installed beside @splitzip/store: ${S3_SDK_INSTALL_COMMAND} (with -g where the splitzip command was installed with -g)` : '';
        throw new StoreError('S3_ERROR', `cannot load the AWS SDK for S3: ${describeError(error)}${advice}`, {
          details: { endpoint: this.endpoint },
          cause: summarizeCause(error),
        });
      },
    );
    return this.connecting;
  }

  private get client(): S3Client {
    return (this.session as { client: S3Client }).client;
  }

  private get s3(): S3Sdk['s3'] {
    return (this.session as { sdk: S3Sdk }).sdk.s3;
  }

  /**
   * The server's time minus this machine's, in ms, as the SDK keeps it to sign requests
   * (client.config.systemClockOffset, updated from every reply's Date header), for messages; 0
   * before any request, for a client that keeps none (a caller's stand-in) or one built with
   * disableClockSkewCorrection. Ages are judged by judgingNowMs, which applies it only when it is
   * CLOCK_OFFSET_NOISE_MS or more below 0.
   */
  clockOffsetMs(): number {
    const offset = (this.session?.client as { config?: { systemClockOffset?: unknown } } | undefined)?.config?.systemClockOffset;
    return typeof offset === 'number' && Number.isFinite(offset) ? offset : 0;
  }

  /**
   * The offset judgingNowMs applies to this machine's clock: clockOffsetMs when it is
   * CLOCK_OFFSET_NOISE_MS or more below 0 (this machine's clock ahead of the server's), else 0.
   */
  judgingOffsetMs(): number {
    const offset = this.clockOffsetMs();
    return offset <= -CLOCK_OFFSET_NOISE_MS ? offset : 0;
  }

  /**
   * Now for judging an object's age against its Last-Modified: the earlier of this machine's clock
   * and the server's as its replies' Date header gives it (judgingOffsetMs). An age only decides
   * what may be deleted, and a clock read late makes objects look older than they are: this
   * machine's clock ahead of the server's made gc and the drop delete a running writer's fresh
   * objects, and so did a Date header from a clock ahead of the one that stamps Last-Modified (a
   * proxy such as nginx sets its own Date; nodes behind a load balancer with differing clocks). The
   * earlier clock judges no object older than this machine's clock alone did.
   */
  judgingNowMs(): number {
    return Date.now() + this.judgingOffsetMs();
  }

  /** `s3://bucket/prefix/name`, for messages. */
  describe(name: string): string {
    return `${this.location.url}${name}`;
  }

  private objectKey(name: string): string {
    return `${this.location.prefix}${name}`;
  }

  /**
   * Runs one request (each attempt holds a concurrency slot; backoff does not). Every attempt gets
   * an abort signal that fires at the store's `signal` (then ABORTED, no more attempts) or at
   * `requestDeadlineMs` (a server that trickles bytes is never idle long enough for the socket
   * timeout: the attempt counts as a transient failure).
   */
  private withRetries<T>(operation: string, name: string, attempt: (abortSignal: AbortSignal) => Promise<T>, group?: AbortSignal): Promise<T> {
    return this.retryLoop(operation, name, attempt, undefined, group) as Promise<T>;
  }

  /** withRetries, with an optional check before every attempt that may call the request off (SKIPPED). */
  private async retryLoop<T>(
    operation: string,
    name: string,
    attempt: (abortSignal: AbortSignal) => Promise<T>,
    beforeAttempt?: () => Promise<boolean>,
    group?: AbortSignal,
  ): Promise<T | typeof SKIPPED> {
    const { maxAttempts, retryBaseDelayMs, retryMaxDelayMs, requestDeadlineMs } = this.settings;
    const caller = this.options.signal;
    let last: unknown;
    let attempts = 0;
    let silent = 0;
    // One more attempt after a clock-skew refusal: the SDK has corrected its signing clock from that
    // reply's Date header, so it goes through unless the skew is the client's to keep (no correction).
    let attemptsAllowed = maxAttempts;
    let skewRetried = false;
    // Only an endpoint that has never answered this transport is judged dead early: once it has, a
    // silent spell is a blip (a failover, a flaky link) that a long build rides out on maxAttempts.
    const silentCap = (): number => (this.endpointAnswered ? Infinity : MAX_SILENT_ATTEMPTS);
    for (let n = 0; n < attemptsAllowed && silent < silentCap(); n++) {
      attempts = n + 1;
      this.throwIfAborted(operation, name);
      throwIfGroupFailed(group);
      if (n > 0) {
        const ceiling = Math.min(retryMaxDelayMs, retryBaseDelayMs * 2 ** (n - 1));
        const wake = caller !== undefined && group !== undefined ? AbortSignal.any([caller, group]) : (caller ?? group);
        await sleep(ceiling / 2 + Math.random() * (ceiling / 2), undefined, wake ? { signal: wake } : undefined).catch(() => undefined);
        this.throwIfAborted(operation, name);
        throwIfGroupFailed(group);
      }
      // Outside the concurrency slot: the check makes requests of its own.
      if (beforeAttempt !== undefined && !(await beforeAttempt())) return SKIPPED;
      let deadline: AbortSignal | undefined;
      try {
        // The deadline starts with the attempt itself, not while it waits for a concurrency slot.
        const result = await this.limiter.run(() => {
          deadline = AbortSignal.timeout(requestDeadlineMs);
          const signals = [caller, deadline, group].filter((signal): signal is AbortSignal => signal !== undefined);
          return attempt(signals.length === 1 ? deadline : AbortSignal.any(signals));
        });
        this.endpointAnswered = true;
        return result;
      } catch (error) {
        this.throwIfAborted(operation, name);
        throwIfGroupFailed(group);
        if (deadline?.aborted) {
          silent = 0;
          last = new Error(`no complete response within requestDeadlineMs (${requestDeadlineMs} ms)`);
          continue;
        }
        if (isClockSkewError(error, this.clockOffsetMs()) && !skewRetried) {
          skewRetried = true;
          attemptsAllowed++;
          silent = 0;
          this.endpointAnswered = true;
          last = error;
          continue;
        }
        if (!isTransientS3Error(error)) throw this.wrap(operation, name, error);
        silent = isSilentAttempt(error) ? silent + 1 : 0;
        if (isReply(error)) this.endpointAnswered = true;
        last = error;
      }
    }
    const why = silent >= silentCap() ? `answered nothing to ${operation} ${silent} times in a row (MAX_SILENT_ATTEMPTS)` : `failed ${operation} ${attempts} times in a row`;
    throw new StoreError(
      'S3_UNAVAILABLE',
      `S3 endpoint ${this.endpoint} ${why} (last: ${describeError(last)}); retry later`,
      { path: this.describe(name), details: { endpoint: this.endpoint, operation, attempts, bucket: this.location.bucket }, cause: summarizeCause(last) },
    );
  }

  /** ABORTED, carrying the caller's reason, once the store's `signal` has fired. */
  private throwIfAborted(operation: string, name: string): void {
    const signal = this.options.signal;
    if (signal?.aborted) {
      throw new StoreError('ABORTED', `S3 ${operation} aborted by the caller`, { path: this.describe(name), details: { operation, reason: signal.reason }, cause: signal.reason });
    }
  }

  private wrap(operation: string, name: string, error: unknown): StoreError {
    if (error instanceof StoreError) return error;
    // A 403 says little by itself ("Unknown HTTP 403 UnknownError" from some servers): name the usual cause.
    // No credentials found at all: the SDK's message lists no source to set (a pipeline run without
    // the gateway's environment got only "Could not load credentials from any providers").
    const hint = isClockSkewError(error, this.clockOffsetMs())
      ? ` (this machine's clock differs from the server's by more than S3 allows (15 min on AWS)${this.clockOffsetMs() === 0 ? '' : `: it is ${describeClockOffset(this.clockOffsetMs())} by its replies' Date`}; fix the clock (NTP): the credentials were not judged)`
      : statusOf(error) === 403
        ? ' (access denied: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the bucket policy)'
        : (error as { name?: unknown } | null)?.name === 'CredentialsProviderError'
          ? ' (no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), and AWS_ENDPOINT_URL for a gateway that is not AWS)'
          : '';
    return new StoreError('S3_ERROR', `S3 ${operation} failed at ${this.endpoint}: ${describeError(error)}${hint}`, {
      path: this.describe(name),
      details: { endpoint: this.endpoint, operation, status: statusOf(error), s3Code: (error as { name?: unknown })?.name, ...(isClockSkewError(error, this.clockOffsetMs()) ? { clockOffsetMs: this.clockOffsetMs() } : {}) },
      cause: summarizeCause(error),
    });
  }

  /** Whether the bucket exists (HeadBucket; a 404 says it does not). */
  async bucketExists(): Promise<boolean> {
    await this.connect();
    const Bucket = this.location.bucket;
    return this.withRetries('HeadBucket', '', async (abortSignal) => {
      try {
        await this.client.send(new this.s3.HeadBucketCommand({ Bucket }), { abortSignal });
        return true;
      } catch (error) {
        if (isNotFound(error)) return false;
        throw error;
      }
    });
  }

  /** Creates the bucket if it does not exist. */
  async ensureBucket(): Promise<void> {
    const Bucket = this.location.bucket;
    if (await this.bucketExists()) return;
    await this.withRetries('CreateBucket', '', async (abortSignal) => {
      try {
        await this.client.send(new this.s3.CreateBucketCommand({ Bucket }), { abortSignal });
      } catch (error) {
        const name = (error as { name?: unknown }).name;
        // Another process created it first.
        if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw error;
      }
    });
  }

  /** PUTs a whole object with Content-MD5, so the server rejects a body damaged on the way. */
  async putObject(name: string, body: Uint8Array, contentType = 'application/octet-stream'): Promise<void> {
    await this.connect();
    if (body.length > this.settings.multipartThresholdBytes) {
      await this.putMultipart(name, body, contentType);
      return;
    }
    const md5 = md5Base64(body);
    await this.withRetries('PutObject', name, (abortSignal) => this.client.send(this.putObjectCommand(name, body, md5, contentType), { abortSignal }));
  }

  /** A PutObject of `body` whole, with its Content-MD5 (the server refuses bytes damaged on the way). */
  private putObjectCommand(name: string, body: Uint8Array, md5: string, contentType: string, condition: { IfNoneMatch?: string } = {}) {
    return new this.s3.PutObjectCommand({
      Bucket: this.location.bucket,
      Key: this.objectKey(name),
      Body: toBuffer(body),
      ContentLength: body.length,
      ContentMD5: md5,
      ContentType: contentType,
      ...condition,
    });
  }

  /**
   * PUTs a small object only if no object of that name exists (`If-None-Match: *`, with Content-MD5):
   * `created`, or `exists` when the server refused (412, or 409 while another conditional write of
   * it runs), or `unsupported` when the server does not implement the condition (501 NotImplemented:
   * AWS S3 before August 2024); the caller then needs another way. A server that ignores the header
   * silently cannot be told apart from `created`.
   */
  async putObjectIfAbsent(name: string, body: Uint8Array, contentType = 'application/octet-stream'): Promise<'created' | 'exists' | 'unsupported'> {
    await this.connect();
    const md5 = md5Base64(body);
    return this.withRetries('PutObject', name, async (abortSignal) => {
      try {
        await this.client.send(this.putObjectCommand(name, body, md5, contentType, { IfNoneMatch: '*' }), { abortSignal });
        return 'created';
      } catch (error) {
        // A retried attempt whose first try created the object (the reply was lost) lands here too:
        // the caller reads what is there, its own bytes then.
        if (isPreconditionFailed(error)) return 'exists';
        if (isNotImplemented(error)) return 'unsupported';
        throw error;
      }
    });
  }

  private async putMultipart(name: string, body: Uint8Array, contentType: string): Promise<void> {
    const Bucket = this.location.bucket;
    const Key = this.objectKey(name);
    const partBytes = Math.min(MAX_PART_BYTES, Math.max(MIN_PART_BYTES, this.settings.partSizeBytes * 2));
    const created = await this.withRetries('CreateMultipartUpload', name, (abortSignal) =>
      this.client.send(new this.s3.CreateMultipartUploadCommand({ Bucket, Key, ContentType: contentType }), { abortSignal }),
    );
    const UploadId = created.UploadId;
    if (!UploadId) throw new StoreError('S3_ERROR', 'CreateMultipartUpload returned no UploadId', { path: this.describe(name) });
    try {
      const count = Math.ceil(body.length / partBytes);
      const parts = await Promise.all(
        Array.from({ length: count }, async (_, i) => {
          const part = body.subarray(i * partBytes, Math.min(body.length, (i + 1) * partBytes));
          const md5 = md5Base64(part);
          const out = await this.withRetries('UploadPart', name, (abortSignal) =>
            this.client.send(new this.s3.UploadPartCommand({ Bucket, Key, UploadId, PartNumber: i + 1, Body: toBuffer(part), ContentLength: part.length, ContentMD5: md5 }), { abortSignal }),
          );
          return { PartNumber: i + 1, ETag: out.ETag };
        }),
      );
      await this.withRetries('CompleteMultipartUpload', name, (abortSignal) =>
        this.client.send(new this.s3.CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts: parts } }), { abortSignal }),
      );
    } catch (error) {
      // Best effort, one attempt of at most MULTIPART_CLEANUP_DEADLINE_MS: gc aborts what is left (a
      // killed writer cannot run this at all). Unbounded, a caller's abort on a stalling endpoint
      // waited here for the 30 s socket timeout. Not the caller's signal: it has usually fired already.
      await this.client
        .send(new this.s3.AbortMultipartUploadCommand({ Bucket, Key, UploadId }), { abortSignal: AbortSignal.timeout(Math.min(MULTIPART_CLEANUP_DEADLINE_MS, this.settings.requestDeadlineMs)) })
        .catch(() => undefined);
      throw error;
    }
  }

  /**
   * A small whole object (at most `maxBytes`), or undefined when absent. With `mustExist` (the object
   * is known to exist: a conditional create was just refused for it) a 404 is retried like a 5xx and
   * ends, when it persists, in S3_UNAVAILABLE instead of undefined.
   */
  async getSmallObject(name: string, maxBytes: number, options: { mustExist?: boolean } = {}): Promise<Uint8Array | undefined> {
    await this.connect();
    return this.withRetries('GetObject', name, async (abortSignal) => {
      let response;
      try {
        response = await this.client.send(new this.s3.GetObjectCommand({ Bucket: this.location.bucket, Key: this.objectKey(name) }), { abortSignal });
      } catch (error) {
        if (isNotFound(error) && options.mustExist === true) throw new ObjectNotFoundYet('GET answered 404 for an object the server said exists');
        if (isNotFound(error)) return undefined;
        throw error;
      }
      const body = response.Body as Readable | undefined;
      const length = response.ContentLength;
      const tooBig = (sizeBytes: number | undefined) =>
        new StoreError('SIZE_INVALID', `object is ${sizeBytes ?? `more than ${maxBytes}`} bytes, above the ${maxBytes} allowed for it`, {
          path: this.describe(name),
          details: { sizeBytes, limit: maxBytes },
        });
      if (length === undefined) {
        // No Content-Length (chunked transfer encoding, valid HTTP/1.1 from S3-compatible servers and
        // proxies): read what comes, up to the limit. A body cut off is an error of the stream (retried).
        return readBodyUpTo(body, maxBytes, () => tooBig(undefined));
      }
      if (length < 0 || length > maxBytes) {
        body?.destroy();
        throw tooBig(length);
      }
      const target = new Uint8Array(length);
      await readBodyInto(body, target, 0);
      return target;
    });
  }

  /**
   * Reads bytes [0, target.length) of an object whose total size must be `target.length` into
   * `target`: one GET, or parallel ranged GETs of partSizeBytes for a big object. A broken body is
   * resumed with a ranged GET from where it stopped. BLOB_MISSING (404), BLOB_SIZE_MISMATCH.
   */
  async getObjectInto(name: string, target: Uint8Array, entry: string): Promise<void> {
    await this.connect();
    const part = this.settings.partSizeBytes;
    if (target.length <= part) {
      await this.getRangeInto(name, target, 0, entry);
      return;
    }
    const count = Math.ceil(target.length / part);
    // Every part has its own retries; the limiter bounds how many are in flight.
    await runPartsTogether(count, (i, group) => this.getRangeInto(name, target.subarray(i * part, Math.min(target.length, (i + 1) * part)), i * part, entry, target.length, undefined, group));
  }

  /**
   * Fills `target` with object bytes [start, start + target.length); the object must be `totalBytes`
   * long and, with `ifMatch`, still have that ETag (else OBJECT_CHANGED: the server answered 412).
   */
  private async getRangeInto(name: string, target: Uint8Array, start: number, entry: string, totalBytes = target.length, ifMatch?: string, group?: AbortSignal): Promise<void> {
    let filled = 0;
    await this.withRetries('GetObject', name, async (abortSignal) => {
      const from = start + filled;
      const to = start + target.length - 1;
      const whole = start === 0 && target.length === totalBytes && filled === 0;
      let response;
      try {
        response = await this.client.send(
          new this.s3.GetObjectCommand({
            Bucket: this.location.bucket,
            Key: this.objectKey(name),
            Range: whole || target.length === 0 ? undefined : `bytes=${from}-${to}`,
            IfMatch: ifMatch,
          }),
          { abortSignal },
        );
      } catch (error) {
        if (isNotFound(error)) throw blobMissing(this.describe(name), entry);
        // Replaced since its ETag was read: every byte of one read comes from one version, or none.
        if (ifMatch !== undefined && statusOf(error) === 412) {
          throw new StoreError('OBJECT_CHANGED', `the object no longer has ETag ${ifMatch} (replaced since it was opened)`, {
            entry,
            path: this.describe(name),
            details: { etag: ifMatch, status: 412 },
          });
        }
        if (statusOf(error) === 416) throw sizeMismatch(this.describe(name), entry, undefined, totalBytes);
        throw error;
      }
      const body = response.Body as Readable | undefined;
      // A store that ignores If-Match (some S3-compatible servers) answers with the new version:
      // its ETag says so. Bytes of another version than the one opened (and stamped) never count.
      if (ifMatch !== undefined && response.ETag !== undefined && normalizeEtag(response.ETag) !== normalizeEtag(ifMatch)) {
        body?.destroy();
        throw new StoreError('OBJECT_CHANGED', `the object no longer has ETag ${ifMatch} (replaced since it was opened; the server sent ${response.ETag})`, {
          entry,
          path: this.describe(name),
          details: { etag: ifMatch, got: response.ETag },
        });
      }
      if (whole && response.ContentLength === undefined) {
        // No Content-Length (chunked): the object's size is what arrives. A body that ends cleanly
        // short is a shorter object; one cut off is an error of the stream (retried, resumed by range).
        try {
          await readBodyInto(body, target, filled, (n) => (filled = n));
        } catch (error) {
          if (error instanceof BodyInterrupted) throw sizeMismatch(this.describe(name), entry, filled, totalBytes);
          throw isStoreError(error) ? error.withContext({ entry, path: this.describe(name) }) : error;
        }
        return;
      }
      const objectBytes = whole ? response.ContentLength : parseContentRangeTotal(response.ContentRange);
      if (objectBytes !== totalBytes) {
        body?.destroy();
        throw sizeMismatch(this.describe(name), entry, objectBytes, totalBytes);
      }
      if (!whole && !response.ContentRange?.startsWith(`bytes ${from}-`)) {
        body?.destroy();
        throw new StoreError('S3_ERROR', `ranged GET returned ${String(response.ContentRange)} for bytes=${from}-${to}`, { entry, path: this.describe(name) });
      }
      // Count what arrived even if the body breaks: the next attempt resumes there.
      await readBodyInto(body, target, filled, (n) => (filled = n));
    }, group);
  }

  /** An object's size and ETag, or undefined when it does not exist (HeadObject, retried). */
  async headObject(name: string): Promise<HeadedObject | undefined> {
    await this.connect();
    return this.withRetries('HeadObject', name, async (abortSignal) => {
      try {
        const out = await this.client.send(new this.s3.HeadObjectCommand({ Bucket: this.location.bucket, Key: this.objectKey(name) }), { abortSignal });
        return { sizeBytes: out.ContentLength ?? 0, sizeKnown: out.ContentLength !== undefined, etag: out.ETag || undefined, lastModifiedMs: out.LastModified?.getTime() ?? 0 };
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    });
  }

  /**
   * Fills `target` with bytes [startBytes, startBytes + target.length) of an object that must be
   * `totalBytes` long: ranged GETs of at most partSizeBytes in parallel (bounded by the limiter),
   * each retried and resumed where its body broke. `label` names the read in errors
   * (BLOB_MISSING on 404, BLOB_SIZE_MISMATCH when the object's size is not `totalBytes`, OBJECT_CHANGED
   * when `ifMatch` is given and the object no longer has that ETag: each GET sends If-Match).
   */
  async getRangeOf(name: string, target: Uint8Array, startBytes: number, totalBytes: number, label: string, ifMatch?: string): Promise<void> {
    await this.connect();
    if (target.length === 0) return;
    const part = this.settings.partSizeBytes;
    const count = Math.ceil(target.length / part);
    await runPartsTogether(count, (i, group) =>
      this.getRangeInto(name, target.subarray(i * part, Math.min(target.length, (i + 1) * part)), startBytes + i * part, label, totalBytes, ifMatch, group),
    );
  }

  /** Every object below `dir` (relative to the prefix), all pages. */
  async list(dir: string): Promise<ListedObject[]> {
    await this.connect();
    const out: ListedObject[] = [];
    const Prefix = this.objectKey(dir);
    let ContinuationToken: string | undefined;
    // A listing must make progress: a server (or proxy) that hands back a token it gave before, or
    // page after page of nothing, looped here forever (15,000 requests a minute, no error).
    const seenTokens = new Set<string>();
    let emptyPages = 0;
    let lastKey = '';
    do {
      const page = await this.withRetries('ListObjectsV2', dir, (abortSignal) =>
        this.client.send(new this.s3.ListObjectsV2Command({ Bucket: this.location.bucket, Prefix, ContinuationToken, MaxKeys: 1000 }), { abortSignal }),
      );
      const contents = page.Contents ?? [];
      emptyPages = contents.length === 0 ? emptyPages + 1 : 0;
      if (page.IsTruncated && emptyPages > MAX_EMPTY_LIST_PAGES) {
        throw new StoreError('S3_ERROR', `the listing returned ${emptyPages} empty pages in a row, each saying more follow`, { path: this.describe(dir) });
      }
      // Keys come in order (of their UTF-8 bytes): a page that starts at or before the last one
      // would list objects twice.
      const firstKey = contents[0]?.Key;
      if (firstKey !== undefined && lastKey !== '' && Buffer.compare(Buffer.from(firstKey), Buffer.from(lastKey)) <= 0) {
        throw new StoreError('S3_ERROR', 'the listing went backwards (a page repeated keys of an earlier one)', { path: this.describe(dir) });
      }
      lastKey = contents.at(-1)?.Key ?? lastKey;
      for (const object of contents) {
        if (!object.Key?.startsWith(this.location.prefix)) continue;
        out.push({
          name: object.Key.slice(this.location.prefix.length),
          sizeBytes: object.Size ?? 0,
          lastModifiedMs: object.LastModified?.getTime() ?? 0,
          etag: object.ETag || undefined,
        });
      }
      if (out.length > MAX_LISTED_OBJECTS) {
        throw new StoreError('SIZE_INVALID', `more than MAX_LISTED_OBJECTS (${MAX_LISTED_OBJECTS}) objects below ${dir}`, { path: this.describe(dir) });
      }
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
      if (page.IsTruncated && !ContinuationToken) throw new StoreError('S3_ERROR', 'a truncated listing without a continuation token', { path: this.describe(dir) });
      if (ContinuationToken !== undefined) {
        if (seenTokens.has(ContinuationToken)) throw new StoreError('S3_ERROR', 'the listing handed back a continuation token it gave before', { path: this.describe(dir) });
        seenTokens.add(ContinuationToken);
      }
    } while (ContinuationToken);
    return out;
  }

  /**
   * Deletes an object. With `beforeAttempt`, that check runs before every attempt (the first and
   * each retry, after its backoff): when it says false nothing more is sent and this returns false.
   * A retried DELETE would otherwise act on what the check saw before the failed attempt.
   */
  async deleteObject(name: string, beforeAttempt?: () => Promise<boolean>): Promise<boolean> {
    await this.connect();
    const out = await this.retryLoop(
      'DeleteObject',
      name,
      (abortSignal) => this.client.send(new this.s3.DeleteObjectCommand({ Bucket: this.location.bucket, Key: this.objectKey(name) }), { abortSignal }),
      beforeAttempt,
    );
    return out !== SKIPPED;
  }

  /** Unfinished multipart uploads below the prefix. */
  async listMultipartUploads(): Promise<{ name: string; uploadId: string; initiatedMs: number }[]> {
    await this.connect();
    const out: { name: string; uploadId: string; initiatedMs: number }[] = [];
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    // As for list(): markers must move on, or this loops forever.
    const seenMarkers = new Set<string>();
    for (;;) {
      const page = await this.withRetries('ListMultipartUploads', '', (abortSignal) =>
        this.client.send(new this.s3.ListMultipartUploadsCommand({ Bucket: this.location.bucket, Prefix: this.location.prefix, KeyMarker, UploadIdMarker }), { abortSignal }),
      );
      for (const upload of page.Uploads ?? []) {
        if (!upload.Key || !upload.UploadId) continue;
        out.push({ name: upload.Key.slice(this.location.prefix.length), uploadId: upload.UploadId, initiatedMs: upload.Initiated?.getTime() ?? 0 });
      }
      if (!page.IsTruncated) return out;
      if (out.length > MAX_LISTED_OBJECTS) {
        throw new StoreError('SIZE_INVALID', `more than MAX_LISTED_OBJECTS (${MAX_LISTED_OBJECTS}) multipart uploads`, { path: this.describe('') });
      }
      KeyMarker = page.NextKeyMarker;
      UploadIdMarker = page.NextUploadIdMarker;
      if (!KeyMarker && !UploadIdMarker) return out;
      const marker = JSON.stringify([KeyMarker ?? '', UploadIdMarker ?? '']);
      if (seenMarkers.has(marker)) throw new StoreError('S3_ERROR', 'the multipart upload listing handed back markers it gave before', { path: this.describe('') });
      seenMarkers.add(marker);
    }
  }

  async abortMultipartUpload(name: string, uploadId: string): Promise<void> {
    await this.connect();
    await this.withRetries('AbortMultipartUpload', name, async (abortSignal) => {
      try {
        await this.client.send(new this.s3.AbortMultipartUploadCommand({ Bucket: this.location.bucket, Key: this.objectKey(name), UploadId: uploadId }), { abortSignal });
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    });
  }

  destroy(): void {
    this.destroyed = true;
    this.session?.client.destroy(); // one still connecting is destroyed as soon as it is made
  }
}

/** BLOB_MISSING for a blob object that is not there (a GET's 404, a HEAD without an answer). */
export function blobMissing(path: string, entry: string): StoreError {
  return new StoreError('BLOB_MISSING', 'the blob object does not exist', { entry, path });
}

/** BLOB_SIZE_MISMATCH for a blob object of another size than its entry says (a GET's or a HEAD's). */
export function sizeMismatch(path: string, entry: string, objectBytes: number | undefined, expected: number): StoreError {
  return new StoreError('BLOB_SIZE_MISMATCH', `the blob object holds ${String(objectBytes)} bytes, the entry says ${expected}`, {
    entry,
    path,
    details: { objectBytes, expectedBytes: expected },
  });
}

function parseContentRangeTotal(contentRange: string | undefined): number | undefined {
  const m = /^bytes (?:\d+-\d+|\*)\/(\d+)$/.exec(contentRange ?? '');
  return m ? Number(m[1]) : undefined;
}

/** A whole body of unknown length, refused (tooBig) once it passes `maxBytes`. */
async function readBodyUpTo(body: Readable | undefined, maxBytes: number, tooBig: () => Error): Promise<Uint8Array> {
  if (!body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for await (const chunk of body as AsyncIterable<Uint8Array>) {
      total += chunk.length;
      if (total > maxBytes) throw tooBig();
      chunks.push(chunk);
    }
  } catch (error) {
    throw bodyError(error);
  } finally {
    body.destroy();
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/**
 * Copies a response body into target[from..] without an intermediate buffer. More bytes than the
 * target holds is a size mismatch; fewer (the server went away) is BodyInterrupted, retried.
 */
async function readBodyInto(body: Readable | undefined, target: Uint8Array, from: number, progress?: (filled: number) => void): Promise<void> {
  let at = from;
  if (!body) {
    if (at === target.length) return;
    throw new BodyInterrupted('response without a body');
  }
  try {
    for await (const chunk of body as AsyncIterable<Uint8Array>) {
      if (chunk.length > target.length - at) {
        throw new StoreError('BLOB_SIZE_MISMATCH', `the response body is longer than the ${target.length - from} bytes asked for`, {
          details: { expectedBytes: target.length - from },
        });
      }
      target.set(chunk, at);
      at += chunk.length;
      progress?.(at);
    }
  } catch (error) {
    throw bodyError(error);
  } finally {
    body.destroy();
  }
  if (at !== target.length) throw new BodyInterrupted(`response body ended after ${at - from} of ${target.length - from} bytes`);
}

/** Thrown into a part whose sibling failed: never seen by callers (runPartsTogether rethrows the first failure). */
class SiblingFailed extends Error {}

function throwIfGroupFailed(group: AbortSignal | undefined): void {
  if (group?.aborted) throw new SiblingFailed('a sibling part failed');
}

/**
 * Runs `count` parts of one read in parallel, each writing its own span of the caller's buffer.
 * The first to fail calls the others off (their requests aborted, no more attempts), and the
 * failure is rethrown only once every part has settled: a part still writing into the buffer after
 * the read failed wrote into memory its caller had taken back (a retry of the read, another tensor's
 * staging slot), once a read that failed could be retried (OBJECT_MISSING / OBJECT_CHANGED confirmed
 * by a HEAD: open-s3-object-source.ts).
 */
async function runPartsTogether(count: number, run: (index: number, group: AbortSignal) => Promise<void>): Promise<void> {
  const group = new AbortController();
  let first: { error: unknown } | undefined;
  const parts = Array.from({ length: count }, (_, i) =>
    run(i, group.signal).catch((error: unknown) => {
      if (first === undefined && !(error instanceof SiblingFailed)) {
        first = { error };
        group.abort();
      }
    }),
  );
  await Promise.all(parts);
  if (first !== undefined) throw first.error;
}
