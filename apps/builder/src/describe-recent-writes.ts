// The CLI's words for the s3:// drop's 'recent-writes' refusal: the store's message names its
// library option (minAgeMs) and not when a retry passes; this says when, in UTC, for the --min-age
// given and for the shortest one gc accepts.
import { MIN_S3_GC_AGE_MS, StoreError, isStoreError } from '@splitzip/store';

/** `2026-12-07 05:10:00 UTC`, rounded up to the second (a retry at that second passes). */
function formatUtc(ms: number): string {
  return `${new Date(Math.ceil(ms / 1000) * 1000).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** --min-age as a user writes it: 1h, 40m, 2400s. */
export function formatMinAge(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  return `${Math.round(ms / 1000)}s`;
}

/**
 * The sentence for a StoreError whose `details.reason` is 'recent-writes' (its `newestAgeMs` and
 * `minAgeMs`, judged at about `nowMs`), or null for any other error. The newest object reaches
 * --min-age at nowMs + minAgeMs - newestAgeMs, if nothing is written meanwhile.
 */
export function describeRecentWritesWait(error: unknown, nowMs: number): string | null {
  if (!isStoreError(error)) return null;
  const details = error.details;
  if (details?.reason !== 'recent-writes') return null;
  const { newestAgeMs, minAgeMs } = details;
  if (typeof newestAgeMs !== 'number' || typeof minAgeMs !== 'number') return null;
  const passAtMs = nowMs + minAgeMs - newestAgeMs;
  const floorAtMs = nowMs + MIN_S3_GC_AGE_MS - newestAgeMs;
  const floor = formatMinAge(MIN_S3_GC_AGE_MS);
  const shortest =
    minAgeMs <= MIN_S3_GC_AGE_MS
      ? ` (--min-age ${floor}, the shortest gc takes)`
      : floorAtMs <= nowMs
        ? `; with --min-age ${floor}, the shortest, it would pass now if nothing is written meanwhile`
        : `; --min-age ${floor}, the shortest, waits least: quiet until ${formatUtc(floorAtMs)}`;
  return `the cache must stay quiet (no build, gc, or loader recording stamps) until ${formatUtc(passAtMs)}, when its newest object is --min-age (${formatMinAge(minAgeMs)}) old: run gc again then${shortest}`;
}

/**
 * The store's 'recent-writes' refusal with the CLI's sentence (describeRecentWritesWait, now) after
 * its message, code, path and details kept; any other error as it is.
 */
export function addRecentWritesWait(error: unknown): unknown {
  const sentence = describeRecentWritesWait(error, Date.now());
  if (sentence === null || !(error instanceof StoreError)) return error;
  const wrapped = new StoreError(error.code, error.reason, {
    ...(error.entry === undefined ? {} : { entry: error.entry }),
    ...(error.path === undefined ? {} : { path: error.path }),
    details: error.details,
    cause: error,
  });
  // After the store's whole message, its "(file …)" included: as inspect quotes it, then the sentence.
  wrapped.message = `${error.message}; ${sentence}`;
  return wrapped;
}

/**
 * The short form of describeRecentWritesWait for a report's indented line (gc's dry run, inspect's
 * unbound line): when a retry passes (from the refusal's `details`: newestAgeMs, minAgeMs, judged
 * at about `nowMs`), and when with the shortest --min-age; null where the details are not a
 * 'recent-writes' refusal's. At most ~113 columns with its indent: those lines keep within 120.
 */
export function describeRecentWritesRetry(details: Record<string, unknown> | undefined, nowMs: number): string | null {
  if (details?.reason !== 'recent-writes') return null;
  const { newestAgeMs, minAgeMs } = details;
  if (typeof newestAgeMs !== 'number' || typeof minAgeMs !== 'number') return null;
  const floorAtMs = nowMs + MIN_S3_GC_AGE_MS - newestAgeMs;
  const floor = formatMinAge(MIN_S3_GC_AGE_MS);
  const shortest = minAgeMs <= MIN_S3_GC_AGE_MS ? '' : floorAtMs <= nowMs ? `; --min-age ${floor} would pass now` : `; --min-age ${floor} waits least: ${formatUtc(floorAtMs)}`;
  return `retry if quiet until ${formatUtc(nowMs + minAgeMs - newestAgeMs)} (--min-age ${formatMinAge(minAgeMs)})${shortest}`;
}

/** Whether `details` are the s3:// drop's 'recent-writes' refusal's (a cache written to within --min-age). */
export function isRecentWritesRefusal(details: Record<string, unknown> | undefined): boolean {
  return details?.reason === 'recent-writes';
}
