// The s3:// drop's 'recent-writes' refusal names the store's option (minAgeMs) and not when a
// retry passes: gc and inspect add when, in UTC, for the --min-age given and the shortest one.
// Run in this process (gc on a directory cache whose store is made to refuse as an s3:// one does).
import { MIN_S3_GC_AGE_MS, StoreError, openCacheStore, type CacheStore } from '@splitzip/store';
import { join } from 'node:path';
import type { GcCommandReport } from '../src/commands/gc.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addRecentWritesWait, describeRecentWritesWait } from '../src/describe-recent-writes.js';
import { findDropRefusal } from '../src/find-drop-refusal.js';
import type { InspectReport } from '../src/inspect-cache.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

const NOW_MS = Date.parse('2026-12-07T04:00:00Z');
const MIN = 60_000;

/** The store's refusal, as checkS3CacheQuiet throws it (its message cut short). */
function recentWrites(newestAgeMs: number, minAgeMs: number, path = 's3://b/c'): StoreError {
  return new StoreError('INVALID_ARGUMENT', 'dropUnboundEntries refuses: the cache was written to recently (a test)', {
    path,
    details: { reason: 'recent-writes', recentObjects: 3, recentUploads: 0, newestAgeMs, newestObject: 'slices/x', minAgeMs, clockOffsetMs: 0 },
  });
}

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-recent-writes-');
});
afterAll(async () => temp?.cleanup());

describe("the drop's recent-writes refusal says when a retry passes", () => {
  it('the UTC time the newest object reaches --min-age, and the shortest --min-age', () => {
    expect(MIN_S3_GC_AGE_MS).toBe(35 * MIN);
    // 10 min old, --min-age 1h: 50 min from now; 35m: 25 min from now.
    expect(describeRecentWritesWait(recentWrites(10 * MIN, 60 * MIN), NOW_MS)).toBe(
      'the cache must stay quiet (no build, gc, or loader recording stamps) until 2026-12-07 04:50:00 UTC, when its newest object is --min-age (1h) old: run gc again then; --min-age 35m, the shortest, waits least: quiet until 2026-12-07 04:25:00 UTC',
    );
    // Already older than the floor: 35m would pass now.
    expect(describeRecentWritesWait(recentWrites(40 * MIN, 60 * MIN), NOW_MS)).toMatch(/until 2026-12-07 04:20:00 UTC, .*; with --min-age 35m, the shortest, it would pass now if nothing is written meanwhile$/);
    // At the floor: one time. Rounded up to the second.
    expect(describeRecentWritesWait(recentWrites(10 * MIN + 400, 35 * MIN), NOW_MS)).toBe(
      'the cache must stay quiet (no build, gc, or loader recording stamps) until 2026-12-07 04:25:00 UTC, when its newest object is --min-age (35m) old: run gc again then (--min-age 35m, the shortest gc takes)',
    );
    // Other refusals: nothing added.
    expect(describeRecentWritesWait(new StoreError('MANIFEST_INVALID', 'kept copy'), NOW_MS)).toBeNull();
    expect(addRecentWritesWait(new TypeError('boom'))).toBeInstanceOf(TypeError);
    // The store's whole message first, its code, path and details kept.
    const store = recentWrites(10 * MIN, 60 * MIN);
    const added = addRecentWritesWait(store) as StoreError;
    expect(added.message.startsWith(`${store.message}; the cache must stay quiet`)).toBe(true);
    expect(added).toMatchObject({ code: 'INVALID_ARGUMENT', path: 's3://b/c', details: store.details });
  });

  it('gc (text and --json) and inspect (text and totals.dropRefusal) add it; inspect passes --min-age to the dry run', async () => {
    const model = join(temp.path, 'm');
    const cache = join(temp.path, 'cache');
    await writeShardedTestModel(model, [gaussianBf16('a.weight', [64, 64], 1501)], 8192);
    const built = await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--quiet']);
    expect(built.code, built.err).toBe(0);
    const probe = await openCacheStore(cache);
    const proto = Object.getPrototypeOf(probe) as { dropUnboundEntries: (options?: Record<string, unknown>) => Promise<unknown> };
    await probe.close();
    const original = proto.dropUnboundEntries;
    proto.dropUnboundEntries = () => Promise.reject(recentWrites(10 * MIN, 60 * MIN, cache));
    const until = /until (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC, when its newest object is --min-age \(1h\) old: run gc again then; --min-age 35m, the shortest, waits least: quiet until (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC/;
    /** The two times said, as offsets from the run's start (50 and 25 min, to within the run's length). */
    const offsets = (text: string, startMs: number): number[] => {
      const found = until.exec(text);
      expect(found, text).not.toBeNull();
      return [found![1]!, found![2]!].map((t) => Date.parse(`${t.replace(' ', 'T')}Z`) - startMs);
    };
    const near = (offsetsMs: number[], endMs: number, startMs: number): void => {
      for (const [i, expected] of [50 * MIN, 25 * MIN].entries()) {
        expect(offsetsMs[i]!).toBeGreaterThanOrEqual(expected - 1000);
        expect(offsetsMs[i]!).toBeLessThanOrEqual(expected + (endMs - startMs) + 1000);
      }
    };
    try {
      let start = Date.now();
      const text = await runInProcess(['gc', cache, '--drop-unbound-entries']);
      expect(text.code).toBe(1);
      expect(text.err).toContain(`INVALID_ARGUMENT: dropUnboundEntries refuses: the cache was written to recently (a test) (file ${cache}); the cache must stay quiet (no build, gc, or loader recording stamps) until `);
      near(offsets(text.err, start), Date.now(), start);

      // Its dry run reports (exit 0; it failed as the real run before), the refusal and when a
      // retry passes on lines of their own, and in --json as unboundEntries.dropRefusal.
      start = Date.now();
      const dry = await runInProcess(['gc', cache, '--drop-unbound-entries', '--dry-run']);
      expect(dry.code, dry.err).toBe(0);
      const retry = /^the real run would be refused now: the cache was written to within --min-age \(1h\)\n {2}retry if quiet until (\S+ \S+) UTC \(--min-age 1h\); --min-age 35m waits least: (\S+ \S+) UTC$/m.exec(dry.out);
      expect(retry, dry.out).not.toBeNull();
      near([retry![1]!, retry![2]!].map((t) => Date.parse(`${t.replace(' ', 'T')}Z`) - start), Date.now(), start);
      const dryJson = await runInProcess(['gc', cache, '--drop-unbound-entries', '--dry-run', '--json']);
      expect(dryJson.code, dryJson.err).toBe(0);
      const dropRefusal = (JSON.parse(dryJson.out) as GcCommandReport).unboundEntries!.dropRefusal!;
      expect(dropRefusal).toMatchObject({ code: 'INVALID_ARGUMENT', details: { reason: 'recent-writes', newestAgeMs: 10 * MIN, minAgeMs: 60 * MIN } });
      near(offsets(dropRefusal.wait!, start), Date.now(), start);

      start = Date.now();
      const json = await runInProcess(['gc', cache, '--drop-unbound-entries', '--json']);
      expect(json.code).toBe(1);
      const error = (JSON.parse(json.out) as { error: { code: string; reason: string; message: string } }).error;
      expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', reason: 'recent-writes' });
      near(offsets(error.message, start), Date.now(), start);

      start = Date.now();
      const inspected = await runInProcess(['inspect', cache, '--json']);
      expect(inspected.code, inspected.err).toBe(0);
      const refusal = (JSON.parse(inspected.out) as InspectReport).totals.dropRefusal!;
      expect(refusal).toMatchObject({ code: 'INVALID_ARGUMENT', details: { reason: 'recent-writes', newestAgeMs: 10 * MIN, minAgeMs: 60 * MIN, newestObject: 'slices/x' } });
      near(offsets(refusal.wait!, start), Date.now(), start);
    } finally {
      proto.dropUnboundEntries = original;
    }

    // The dry run inspect asks is given its --min-age (as gc's is).
    const asked: Record<string, unknown>[] = [];
    const store = { dropUnboundEntries: (options: Record<string, unknown>) => (asked.push(options), Promise.resolve({ dryRun: true, count: 0, entries: [], reclaimedBytes: 0, blobsLeft: [] })) } as unknown as CacheStore;
    expect(await findDropRefusal(store, { minAgeMs: 35 * MIN })).toBeNull();
    expect(await findDropRefusal(store)).toBeNull();
    expect(asked).toEqual([{ dryRun: true, minAgeMs: 35 * MIN }, { dryRun: true }]);
  });

  it('inspect --min-age: s3:// only, 35m at least, usage errors (exit 2) before any request', async () => {
    const dir = await runInProcess(['inspect', join(temp.path, 'cache'), '--min-age', '1h']);
    expect(dir.code).toBe(2);
    expect(dir.err).toContain("option '--min-age' applies to s3:// caches only");
    // A bucket that does not exist: any request would fail otherwise (exit 1).
    const short = await runInProcess(['inspect', 's3://splitzip-no-such-bucket-recent/c', '--min-age', '10m']);
    expect(short.code).toBe(2);
    expect(short.err).toContain("option '--min-age' must be at least 35m on an s3:// cache");
  });
});
