// kill -9 during a build to S3: what is listed verifies, the next run finishes exactly what is
// missing (an entry whose alias the kill cut off is completed), verify --model passes, gc removes
// the blobs of entries that were never written.
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openCacheStore, type GcReport, type S3GcOptions } from '@splitzip/store';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import type { BuildJson, InspectJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, collect, runCli, runJson, startCli } from './helpers/run-cli.js';
import { describeS3, dropBucket, gatewayProblem, listObjects, rawClient, uniqueBucket } from './helpers/s3.js';

let temp: TempDir;
const client = gatewayProblem ? undefined : rawClient();
const bucket = uniqueBucket('resume');
const TENSORS = 40;

beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
afterAll(async () => {
  if (client) {
    await dropBucket(client, bucket);
    client.destroy();
  }
  await temp?.cleanup();
});

/** Polls the listing until at least `count` entry objects exist (or the timeout passes). */
async function waitForEntries(prefix: string, count: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // NoSuchBucket until the build has created it.
    const n = (await listObjects(client!, bucket, `${prefix}/entries/`).catch(() => [])).length;
    if (n >= count || Date.now() > deadline) return n;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describeS3('resume after kill -9 during a build to S3', () => {
  it('leaves a valid cache at each kill and the rerun completes and verifies', async () => {
    const tensors = Array.from({ length: TENSORS }, (_, i) => gaussianBf16(`model.layers.${i}.weight`, [256, 257 + i], 2000 + i));
    const { indexPath } = await writeShardedTestModel(join(temp.path, 'model'), tensors, 1_500_000);
    const prefix = 'resume';
    const url = `s3://${bucket}/${prefix}`;

    let committed = 0;
    let killedMidway = 0;
    for (const [target, jobs] of [
      [3, '2'],
      [15, '1'],
    ] as const) {
      const child = startCli(['build', indexPath, '--out', url, '--jobs', jobs, '--inline-max-mib', '0', '--quiet']);
      const result = collect(child, 60_000);
      await waitForEntries(prefix, target, 30_000);
      child.kill('SIGKILL');
      const { signal, code } = await result;
      expect(signal === 'SIGKILL' || code === 0).toBe(true);
      if (signal === 'SIGKILL') killedMidway++;

      // Every listed entry verifies (blob before entry: no entry without its blob).
      const { json: verify } = await runJson<VerifyJson>(['verify', url]);
      expect(verify.ok).toBe(true);
      const { json: inspect } = await runJson<InspectJson>(['inspect', url]);
      expect(inspect.totals.entries).toBeGreaterThanOrEqual(committed);
      expect(inspect.totals.entries).toBeLessThanOrEqual(TENSORS);
      // An entry may lack its alias (the kill fell between the two PUTs), never the other way round.
      expect(inspect.totals.slices).toBeLessThanOrEqual(inspect.totals.entries);
      committed = inspect.totals.entries;
    }
    expect(killedMidway).toBeGreaterThan(0);
    expect(committed).toBeLessThan(TENSORS);

    const { json: finish } = await runJson<BuildJson>(['build', indexPath, '--out', url]);
    expect(finish.encoded).toBe(TENSORS - committed);
    expect(finish.cached).toBe(committed);
    const { json: verify } = await runJson<VerifyJson>(['verify', url, '--model', indexPath]);
    expect(verify.ok).toBe(true);
    expect(verify.model!.totals.ok).toBe(TENSORS);
    const { json: inspect } = await runJson<InspectJson>(['inspect', url]);
    expect(inspect.totals).toMatchObject({ entries: TENSORS, slices: TENSORS });

    // Blobs whose entry the kill prevented are orphans: gc with no minimum age removes exactly those.
    // The CLI refuses an age under MIN_S3_GC_AGE_MS (a running build's blobs are young orphans too),
    // so the test asks the store itself, through its tests-only way under the floor.
    const cleaner = await openCacheStore(url);
    let gc: GcReport;
    try {
      gc = await (cleaner.gc as (options: S3GcOptions) => Promise<GcReport>).call(cleaner, { minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    } finally {
      await cleaner.close();
    }
    const refused = await runCli(['gc', url, '--min-age', '0']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--min-age' must be at least 35m/);
    const objects = await listObjects(client!, bucket, `${prefix}/`);
    expect(objects.filter((o) => o.key.startsWith(`${prefix}/blobs/`))).toHaveLength(TENSORS);
    expect(objects.filter((o) => o.key.startsWith(`${prefix}/entries/`))).toHaveLength(TENSORS);
    for (const orphan of gc.orphanBlobs) expect(objects.some((o) => o.key.endsWith(orphan))).toBe(false);
    const { json: after } = await runJson<VerifyJson>(['verify', url, '--model', indexPath]);
    expect(after.ok).toBe(true);
  });
});
