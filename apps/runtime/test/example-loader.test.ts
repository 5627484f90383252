import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { buildCache, makeTempDir, standardTensors, writeModel } from './fixtures.js';

// The example runs as a user would run it: a separate Node process importing the BUILT package
// (@splitzip/runtime resolves to dist/ by its exports map), so this also checks the published entry.
let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let modelIndex: string;
let cacheDir: string;

beforeAll(async () => {
  const temp = await makeTempDir('example');
  cleanup = temp.cleanup;
  model = await writeModel(`${temp.dir}/model`, standardTensors());
  modelIndex = `${temp.dir}/model/model.safetensors.index.json`;
  cacheDir = `${temp.dir}/cache`;
  await buildCache(model, cacheDir);
});
afterAll(async () => {
  await model?.close();
  await cleanup?.();
});

function runExample(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = fileURLToPath(new URL('../examples/embedded-loader.mjs', import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('examples/embedded-loader.mjs', () => {
  it('loads every tensor into its arena, from the cache where it can, and checks them', async () => {
    const { code, stdout, stderr } = await runExample([modelIndex, cacheDir, '--verify-digest', '--check', '--json']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const result = JSON.parse(stdout);
    expect(result.tensors).toBe(12);
    expect(result.totals.fromCache).toBe(9);
    expect(result.totals.fromRaw).toBe(3);
    expect(result.checked).toEqual({ tensors: 12, mismatches: [] });
    expect(result.reports.filter((r: { digestVerified: boolean }) => r.digestVerified)).toHaveLength(9);
    expect(result.arenaBytes).toBeGreaterThanOrEqual(result.totals.bytesProduced);
  });

  it('prints a human summary, and works without a cache', async () => {
    const withCache = await runExample([modelIndex, cacheDir]);
    expect(withCache.code).toBe(0);
    expect(withCache.stdout).toMatch(/loaded 12 tensors into a .* arena/);
    expect(withCache.stdout).toMatch(/from cache 9, raw 3 \(cached 9, dtype 2, coverage 1\)/);
    const rawOnly = await runExample([modelIndex, '--check', '--json']);
    expect(rawOnly.code).toBe(0);
    expect(JSON.parse(rawOnly.stdout).totals.fromRaw).toBe(12);
  });

  it('exits 1 with the typed error code for a missing cache', async () => {
    const { code, stderr } = await runExample([modelIndex, `${cacheDir}-missing`]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/CACHE_OPEN_FAILED/);
  });
});
