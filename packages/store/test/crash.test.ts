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
  /** How many "step" markers the worker printed. */
  steps: number;
}

/**
 * Runs the worker; with `kill`, SIGKILLs it `delayMs` after it prints step `step` (steps mark the
 * start of each operation, so kills land inside the work whatever the machine's load).
 */
function runWorker(root: string, seed: number, kill?: { step: number; delayMs: number }): Promise<WorkerRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, root, String(seed)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    let timer: NodeJS.Timeout | undefined;
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (kill && timer === undefined && stdout.includes(`step ${kill.step}\n`)) {
        timer = setTimeout(() => child.kill('SIGKILL'), kill.delayMs);
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({ code, signal, stderr, steps: stdout.split('\n').filter((l) => l.startsWith('step ')).length });
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
    const full = await runWorker(await makeTempDir(), 1);
    expect(full.code, full.stderr).toBe(0);
    const outcomes = { killed: 0, finishedFirst: 0, killedBeforeCreate: 0, tornTails: 0, staleLocks: 0, leftTempFiles: 0, leftOrphanBlobs: 0 };
    for (let trial = 0; trial < TRIALS; trial++) {
      const seed = 100 + trial;
      const root = await makeTempDir();
      // A random operation, then a random instant inside it (operations take a few to tens of ms).
      const run = await runWorker(root, seed, { step: Math.floor(rng() * full.steps), delayMs: rng() * 12 });
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
        const blobs = await readdir(join(root, 'blobs'));
        if (blobs.some((n) => n.includes('.tmp-'))) outcomes.leftTempFiles++;
        if (blobs.some((n) => n.endsWith('.bin') && !n.startsWith('.') && !afterKill.getEntry(n.slice(0, 40)))) outcomes.leftOrphanBlobs++;
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
      await done.gc();
      await done.close();
      const leftovers = [...(await readdir(root)), ...(await readdir(join(root, 'blobs')))].filter((n) => n.includes('.tmp-') || n.startsWith('lock'));
      expect(leftovers).toEqual([]);
    }
    // The kills must actually have landed while work was in progress.
    expect(outcomes.killed).toBeGreaterThanOrEqual(TRIALS / 2);
    console.log(`crash test: ${JSON.stringify(outcomes)} (${full.steps} operations per run)`);
  }, 170_000);
});
