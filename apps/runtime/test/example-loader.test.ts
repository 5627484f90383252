import { spawn } from 'node:child_process';
import { cp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
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

  it('a cache that is there but unusable (a damaged manifest): a warning naming it, and every tensor loaded raw and checked', async () => {
    const damaged = `${cacheDir}-damaged`;
    await cp(cacheDir, damaged, { recursive: true });
    const manifest = await readFile(`${damaged}/manifest.json`);
    manifest[manifest.length >> 1]! ^= 0x01;
    await writeFile(`${damaged}/manifest.json`, manifest);
    const { code, stdout, stderr } = await runExample([modelIndex, damaged, '--check', '--json']);
    expect(code, stderr).toBe(0);
    expect(stderr).toMatch(/warning: the shard cache cannot be used, loading raw safetensors: CACHE_OPEN_FAILED: .*MANIFEST_INVALID/);
    const result = JSON.parse(stdout);
    expect(result.totals.fromRaw).toBe(12);
    expect(result.checked).toEqual({ tensors: 12, mismatches: [] });
    expect(result.cacheError).toMatchObject({ code: 'CACHE_OPEN_FAILED', storeCode: 'MANIFEST_INVALID' });
  });

  it('a cache it cannot read (an I/O error: here a manifest link that loops) is a configuration mistake: exit 1, not a raw load', async () => {
    const broken = `${cacheDir}-loop`;
    await cp(cacheDir, broken, { recursive: true });
    await rm(`${broken}/manifest.json`);
    await symlink('manifest.json', `${broken}/manifest.json`);
    const { code, stderr } = await runExample([modelIndex, broken, '--json']);
    expect(code).toBe(1);
    expect(stderr).toMatch(/CACHE_OPEN_FAILED/);
    expect(stderr).not.toMatch(/loading raw safetensors/);
  });

  it('exits 1 with the typed error code for a missing cache', async () => {
    const { code, stderr } = await runExample([modelIndex, `${cacheDir}-missing`]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/CACHE_OPEN_FAILED/);
  });
});

describe('a loadModel iterator dropped mid-load (the built package, in a process with --expose-gc)', () => {
  it('closes the model it opened from a location when the iterator is collected, without Node\'s fd-on-GC warnings', async () => {
    const entry = pathToFileURL(fileURLToPath(new URL('../dist/index.js', import.meta.url))).href;
    const script = `
      import { readdirSync, readlinkSync } from 'node:fs';
      const { loadModel, openShardCache } = await import(${JSON.stringify(entry)});
      const modelDir = ${JSON.stringify(modelIndex.slice(0, modelIndex.lastIndexOf('/')))};
      const shardFds = () => readdirSync('/proc/self/fd').filter((fd) => { try { return readlinkSync('/proc/self/fd/' + fd).startsWith(modelDir + '/'); } catch { return false; } }).length;
      const cache = await openShardCache(${JSON.stringify(cacheDir)});
      for (let i = 0; i < 5; i++) { const it = loadModel(${JSON.stringify(modelIndex)}, cache, { concurrency: 1 })[Symbol.asyncIterator](); await it.next(); }
      await new Promise((r) => setTimeout(r, 50));
      const before = shardFds();
      for (let i = 0; i < 6; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 30)); }
      console.log(JSON.stringify({ before, after: shardFds() }));
      await cache.close();
    `;
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (chunk) => (out += chunk));
      child.stderr.on('data', (chunk) => (err += chunk));
      child.on('error', reject);
      child.on('exit', (exitCode) => resolve({ code: exitCode, stdout: out, stderr: err }));
    });
    expect(stderr).not.toMatch(/Closing file descriptor/);
    expect(code, stderr).toBe(0);
    const { before, after } = JSON.parse(stdout) as { before: number; after: number };
    // Collected and closed: fewer of the shards' descriptors than the abandoned loads had open.
    expect(after).toBeLessThan(before);
  });
});
