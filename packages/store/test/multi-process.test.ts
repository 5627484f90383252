import { spawn, spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { makeTempDir, removeTempDirs } from './helpers.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const WRITERS = 4;
const READERS = 2;
const RUN_MS = 3000;

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.js'))) throw new Error('build the package first (pnpm --filter @splitzip/store build)');
});
afterEach(removeTempDirs);

function runChild(script: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(here, 'fixtures', script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('many processes', () => {
  it(`${WRITERS} writers add and alias while ${READERS} readers refresh and read; nothing is lost`, async () => {
    const root = await makeTempDir();
    const created = await openCacheStore(root, { create: true });
    await created.close();
    // A dead process's lock: all writers race to recover it at start (only one may win each time).
    const dead = spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
    await writeFile(join(root, 'lock'), JSON.stringify({ pid: dead, host: hostname(), bootId: null, startTicks: null, token: 'dddddddddddddddd', createdMs: 0 }));
    // Children start in about 0.3 s; give everyone the same deadline.
    const deadline = String(Date.now() + 500 + RUN_MS);
    const runs = await Promise.all([
      ...Array.from({ length: WRITERS }, (_, id) => runChild('mp-writer.mjs', [root, String(id), deadline])),
      ...Array.from({ length: READERS }, () => runChild('mp-reader.mjs', [root, deadline])),
    ]);
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    const writers = runs.slice(0, WRITERS).map((r) => JSON.parse(r.stdout) as { rounds: number; added: string[]; aliased: [string, string, number, number][] });
    const readers = runs.slice(WRITERS).map((r) => JSON.parse(r.stdout) as { refreshes: number; blobsRead: number; lastSize: number; maxGeneration: number });

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
    for (const reader of readers) {
      expect(reader.refreshes).toBeGreaterThan(0);
      expect(reader.blobsRead).toBeGreaterThan(0);
    }
    const report = await store.verify({ decode: true });
    expect(report.problems).toEqual([]);
    expect(report.checked).toBe(distinct.size);
    console.log(
      `multi-process: ${distinct.size} entries, ${aliases} aliases from ${writers.map((w) => w.rounds).join('/')} writer rounds; ` +
        `readers: ${readers.map((r) => `${r.refreshes} refreshes, ${r.blobsRead} blobs, generation ≤ ${r.maxGeneration}`).join('; ')}`,
    );
    await store.close();
  }, 60_000);
});
