import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { describeS3, dropBucket, gcBelowFloorForTests, rawClient, uniqueBucket } from './s3-helpers.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const WRITERS = 4;
const READERS = 2;
const RUN_MS = 3000;
const CRASH_TRIALS = 6;

interface ChildRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a fixture; with `killAtStep`, SIGKILLs it once it has printed "step <n>" (it prints one before each operation). */
function runChild(script: string, args: string[], killAtStep?: number): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(here, 'fixtures', script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    // Bounded: a child that hangs fails the test instead of stalling it.
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (killAtStep !== undefined && stdout.includes(`step ${killAtStep}\n`)) child.kill('SIGKILL');
    });
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

describeS3('S3 store: many processes and crashes', () => {
  const bucket = uniqueBucket('conc');
  let client: S3Client;
  beforeAll(async () => {
    if (!existsSync(join(here, '..', 'dist', 'index.js'))) throw new Error('build the package first (pnpm --filter @splitzip/store build)');
    client = rawClient();
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  });
  afterAll(async () => {
    await dropBucket(client, bucket);
    client.destroy();
  });

  it(`${WRITERS} writer processes add and alias while ${READERS} readers refresh and read; every alias and entry is there`, async () => {
    const root = `s3://${bucket}/mp/`;
    await (await openCacheStore(root, { create: true })).close();
    const deadline = String(Date.now() + 800 + RUN_MS);
    // The same fixtures as the filesystem test: they only see openCacheStore(root).
    const runs = await Promise.all([
      ...Array.from({ length: WRITERS }, (_, id) => runChild('mp-writer.mjs', [root, String(id), deadline])),
      ...Array.from({ length: READERS }, () => runChild('mp-reader.mjs', [root, deadline])),
    ]);
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    const writers = runs.slice(0, WRITERS).map((r) => JSON.parse(r.stdout) as { rounds: number; added: string[]; aliased: [string, string, number, number][] });
    const readers = runs.slice(WRITERS).map((r) => JSON.parse(r.stdout) as { refreshes: number; blobsRead: number });
    const store = await openCacheStore(root);
    let aliases = 0;
    for (const writer of writers) {
      expect(writer.rounds).toBeGreaterThan(0);
      for (const key of writer.added) expect(store.getEntry(key), `entry ${key}`).toBeDefined();
      for (const [key, shard, offset, size] of writer.aliased) {
        expect(store.lookupBySlice(shard, offset, size)?.key, `${shard}@${offset}`).toBe(key);
        aliases++;
      }
    }
    const distinct = new Set(writers.flatMap((w) => w.added));
    expect(store.size).toBe(distinct.size);
    for (const reader of readers) expect(reader.refreshes).toBeGreaterThan(0);
    const report = await store.verify({ decode: true });
    expect(report.problems).toEqual([]);
    expect(report.checked).toBe(distinct.size);
    console.log(
      `s3 multi-process: ${distinct.size} entries, ${aliases} aliases from ${writers.map((w) => w.rounds).join('/')} writer rounds; ` +
        `readers: ${readers.map((r) => `${r.refreshes} refreshes, ${r.blobsRead} blobs`).join('; ')}`,
    );
    await store.close();
  }, 90_000);

  it(`kill -9 of a writer during adds to S3 (${CRASH_TRIALS} trials), then a rerun completes and verifies`, async () => {
    let killed = 0;
    for (let trial = 0; trial < CRASH_TRIALS; trial++) {
      const root = `s3://${bucket}/crash${trial}/`;
      const seed = 4000 + trial;
      // Steps 1..12 are the adds, aliases and single aliases of the four batches (see crash-worker.mjs).
      const killAt = 1 + ((trial * 5) % 12);
      const first = await runChild('crash-worker.mjs', [root, String(seed)], killAt);
      if (first.signal === 'SIGKILL') killed++;
      else expect(first.code, first.stderr).toBe(0);
      // Whatever was left: every listed entry verifies (a reader never sees half an entry).
      const after = await openCacheStore(root, { create: true });
      const partial = await after.verify({ decode: true });
      expect(partial.problems).toEqual([]);
      await after.close();
      const rerun = await runChild('crash-worker.mjs', [root, String(seed)]);
      expect(rerun.code, rerun.stderr).toBe(0);
      const store = await openCacheStore(root);
      // @ts-expect-error -- plain .mjs fixture shared with the child processes
      const { crashPlan } = (await import('./fixtures/plan.mjs')) as { crashPlan: (seed: number) => { tensors: { key: string; qualname: string; slices: [string, number, number][] }[] } };
      const { tensors } = crashPlan(seed);
      for (const t of tensors) {
        expect(store.getEntry(t.key)?.qualname).toBe(t.qualname);
        for (const [shard, offset, size] of t.slices) expect(store.lookupBySlice(shard, offset, size)?.key).toBe(t.key);
      }
      expect(store.size).toBe(tensors.length);
      const report = await store.verify({ decode: true });
      expect(report.problems).toEqual([]);
      const gc = await gcBelowFloorForTests(store);
      expect(gc.unknownFiles).toEqual([]);
      expect((await store.verify()).ok).toBe(true);
      await store.close();
    }
    expect(killed).toBeGreaterThanOrEqual(CRASH_TRIALS - 1);
  }, 150_000);
});
