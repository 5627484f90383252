import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { JOURNAL_HEADER_BYTES, scanJournalRecords } from '../src/journal-format.js';
import { createRng, makeTempDir, removeTempDirs } from './helpers.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const worker = join(here, 'fixtures', 'crash-worker.mjs');
const TRIALS = 50;
const SEED = 20261202;

interface PlannedTensor {
  key: string;
  qualname: string;
  slices: [string, number, number][];
}

let plan: (seed: number) => { tensors: PlannedTensor[] };

beforeAll(async () => {
  if (!existsSync(join(here, '..', 'dist', 'index.js'))) throw new Error('build the package first (pnpm --filter @splitzip/store build)');
  // @ts-expect-error -- plain .mjs fixture shared with the child processes
  plan = (await import('./fixtures/plan.mjs')).crashPlan;
});

afterEach(removeTempDirs);

interface WorkerRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  /** From the worker's "ready" (imports done, plan built) to its exit. */
  workMs: number;
}

/** Runs the worker; with killAfterMs, SIGKILLs it that long after it reports "ready". */
function runWorker(root: string, seed: number, killAfterMs?: number): Promise<WorkerRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, root, String(seed)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let readyAt = 0;
    let timer: NodeJS.Timeout | undefined;
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.stdout.on('data', (chunk: Buffer) => {
      if (readyAt === 0 && chunk.toString().includes('ready')) {
        readyAt = performance.now();
        if (killAfterMs !== undefined) timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({ code, signal, stderr, workMs: performance.now() - readyAt });
    });
  });
}

async function journalHasTornTail(root: string): Promise<boolean> {
  const generation = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')).generation as number;
  const path = join(root, `journal.${generation}`);
  if (!existsSync(path)) return false;
  const bytes = new Uint8Array(await readFile(path));
  return scanJournalRecords(bytes.subarray(JOURNAL_HEADER_BYTES), JOURNAL_HEADER_BYTES, path).stop !== 'end';
}

/** Everything listed must be planned, consistent and verified; returns the opened store (or undefined before creation). */
async function checkCache(root: string, seed: number): Promise<CacheStore | undefined> {
  if (!existsSync(join(root, 'manifest.json'))) return undefined;
  const store = await openCacheStore(root);
  const planned = new Map(plan(seed).tensors.map((t) => [t.key, t]));
  for (const entry of store.entries()) {
    const expected = planned.get(entry.key);
    expect(expected, `unplanned entry ${entry.key}`).toBeDefined();
    expect(entry.qualname).toBe(expected!.qualname);
    expect(entry.blob).toBe(`blobs/${entry.key}.bin`);
    for (const slice of entry.sliceKeys) expect(expected!.slices).toContainEqual([...slice]);
  }
  const manifest = await readFile(join(root, 'manifest.json'), 'utf8');
  expect(manifest).not.toContain('.tmp-');
  const report = await store.verify();
  expect(report.problems).toEqual([]);
  expect(report.checked).toBe(store.size);
  return store;
}

describe('crash safety', () => {
  it(`survives SIGKILL at random moments (${TRIALS} seeded trials), and a rerun completes the work`, async () => {
    const rng = createRng(SEED);
    // Calibrate the kill window on this machine: the median of three uninterrupted runs.
    const workTimes: number[] = [];
    for (let i = 0; i < 3; i++) {
      const full = await runWorker(await makeTempDir(), 1);
      expect(full.code, full.stderr).toBe(0);
      workTimes.push(full.workMs);
    }
    const workMs = workTimes.sort((a, b) => a - b)[1]!;
    const outcomes = { killed: 0, finishedFirst: 0, killedBeforeCreate: 0, tornTails: 0, staleLocks: 0, tempFiles: 0 };
    for (let trial = 0; trial < TRIALS; trial++) {
      const seed = 100 + trial;
      const root = await makeTempDir();
      const run = await runWorker(root, seed, workMs * rng());
      if (run.signal === 'SIGKILL') {
        outcomes.killed++;
      } else {
        expect(run.code, run.stderr).toBe(0);
        outcomes.finishedFirst++;
      }
      if (existsSync(join(root, 'lock'))) outcomes.staleLocks++;
      const afterKill = await checkCache(root, seed);
      if (afterKill) {
        if (await journalHasTornTail(root)) outcomes.tornTails++;
        await afterKill.close();
      } else {
        outcomes.killedBeforeCreate++;
      }
      // The rerun finishes the work: every planned entry and slice, verified down to the original bytes.
      const rerun = await runWorker(root, seed);
      expect(rerun.code, rerun.stderr).toBe(0);
      const done = (await checkCache(root, seed))!;
      const planned = plan(seed).tensors;
      expect(done.size).toBe(planned.length);
      for (const t of planned) for (const s of t.slices) expect(done.lookupBySlice(...s)?.key).toBe(t.key);
      expect((await done.verify({ decode: true })).ok).toBe(true);
      const gc = await done.gc();
      outcomes.tempFiles += gc.tempFiles.length;
      await done.close();
      const leftovers = [...(await readdir(root)), ...(await readdir(join(root, 'blobs')))].filter((n) => n.includes('.tmp-') || n.startsWith('lock'));
      expect(leftovers).toEqual([]);
    }
    // The kills must actually have landed while work was in progress.
    expect(outcomes.killed).toBeGreaterThanOrEqual(TRIALS / 2);
    console.log(`crash test: ${JSON.stringify(outcomes)} (work ${workMs.toFixed(0)} ms per uninterrupted run)`);
  }, 170_000);
});
