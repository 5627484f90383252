// buildCache called as a library: options a CLI would have refused, memory it cannot get, workers
// under a host started with --input-type, and a worker's failure keeping its own code.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { analyzeModel } from '../src/analyze-model.js';
import { buildCache } from '../src/build-cache.js';
import { verifyModelCache } from '../src/verify-model-cache.js';
import { BuilderError } from '../src/errors.js';
import { wrapBuildError } from '../src/wrap-build-error.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { assertBuilt } from './helpers/run-cli.js';

let temp: TempDir;
let model: string;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
  model = await writeSingleFileModel(join(temp.path, 'model.safetensors'), [0, 1, 2].map((i) => gaussianBf16(`layers.${i}.weight`, [64, 129 + i], 70 + i)));
});
afterAll(async () => temp?.cleanup());

describe('buildCache options', () => {
  it('jobs and maxInFlightBytes that are not whole numbers in range are USAGE errors (NaN hung the build: no worker started, none was awaited in vain)', async () => {
    for (const jobs of [Number.NaN, 1.5, -1, Number.POSITIVE_INFINITY, 65, '2' as unknown as number]) {
      await expect(buildCache({ model, cacheDir: join(temp.path, 'jobs'), jobs, inlineMaxBytes: 0 })).rejects.toMatchObject({ code: 'USAGE', message: expect.stringMatching(/^jobs must be an integer from 0 to 64/) });
    }
    for (const maxInFlightBytes of [Number.NaN, 0, -1, 1.5, 2 ** 53]) {
      await expect(buildCache({ model, cacheDir: join(temp.path, 'slab'), jobs: 2, inlineMaxBytes: 0, maxInFlightBytes })).rejects.toMatchObject({ code: 'USAGE' });
    }
  });

  it('coverageMin and chunkSize out of range are USAGE errors, before the cache directory is made (were the store\'s INVALID_ARGUMENT, after it)', async () => {
    for (const coverageMin of [2, -0.1, Number.NaN, '0.9' as unknown as number]) {
      const cacheDir = join(temp.path, `gate-${String(coverageMin)}`);
      await expect(buildCache({ model, cacheDir, jobs: 0, coverageMin })).rejects.toMatchObject({ code: 'USAGE', message: expect.stringMatching(/^coverageMin must be a number from 0 to 1/) });
      expect(readdirSync(temp.path)).not.toContain(`gate-${String(coverageMin)}`);
    }
    for (const chunkSize of [3, 32, 1000, 131072, Number.NaN]) {
      const cacheDir = join(temp.path, `chunk-${String(chunkSize)}`);
      await expect(buildCache({ model, cacheDir, jobs: 0, chunkSize })).rejects.toMatchObject({ code: 'USAGE', message: expect.stringMatching(/^chunkSize must be a power of two from 64 to 65536/) });
      expect(readdirSync(temp.path)).not.toContain(`chunk-${String(chunkSize)}`);
    }
  });

  it('a cacheDir that looks like a URL but is no s3:// one is USAGE, before a local directory of that name is made (it was, then the store refused it)', async () => {
    // Relative: a URL-like name is one only at the start. A scheme of this test's own, so the old code's directory is known.
    const scheme = `splitzip-test-${process.pid}`;
    try {
      for (const cacheDir of [`${scheme}://bkt/p`, `${scheme}:/bkt/p`]) {
        await expect(buildCache({ model, cacheDir, jobs: 0 })).rejects.toMatchObject({ code: 'USAGE', message: expect.stringContaining('looks like a URL') });
        expect(readdirSync(process.cwd())).not.toContain(`${scheme}:`);
      }
    } finally {
      rmSync(join(process.cwd(), `${scheme}:`), { recursive: true, force: true });
    }
  });

  it('a cacheDir that is a regular file, or under one, is USAGE naming it (it was NOT_WRITABLE: "cannot write the cache directory")', async () => {
    const file = join(temp.path, 'cache-file');
    writeFileSync(file, 'x');
    await expect(buildCache({ model, cacheDir: file, jobs: 0 })).rejects.toMatchObject({
      code: 'USAGE',
      message: `the cache directory ${file} is a file, not a directory: give the cache's directory (an existing cache, or a path where a new one is created)`,
      context: { file, reason: 'out-is-file' },
    });
    const under = join(file, 'sub');
    await expect(buildCache({ model, cacheDir: under, jobs: 0 })).rejects.toMatchObject({
      code: 'USAGE',
      message: `the cache directory ${under} cannot be created: a parent of it, ${file}, is a file, not a directory; give a path under a directory`,
      context: { file: under, reason: 'parent-is-file', parentFile: file },
    });
  });

  it('a cacheDir that is a symbolic link to a missing directory is USAGE naming the link and its target (it was IO_ERROR [ENOTDIR])', async () => {
    const missing = join(temp.path, 'unmounted-disk', 'cache');
    const link = join(temp.path, 'cache-link');
    symlinkSync(missing, link);
    await expect(buildCache({ model, cacheDir: link, jobs: 0 })).rejects.toMatchObject({
      code: 'USAGE',
      message: `the cache directory ${link} is a symbolic link to ${missing}, which does not exist (a disk not mounted, or a directory moved or removed): mount or create ${missing}, or give another path`,
      context: { file: link, reason: 'out-is-dangling-link', linkTarget: missing },
    });
    // Nothing made where the link points.
    expect(existsSync(join(temp.path, 'unmounted-disk'))).toBe(false);
  });

  it('a slab the process cannot reserve is OUT_OF_MEMORY saying what to change (was a bare RangeError)', async () => {
    // 2^50 bytes: beyond any x86-64 or arm64 user address space, whatever the overcommit policy.
    const building = buildCache({ model, cacheDir: join(temp.path, 'oom'), jobs: 1, inlineMaxBytes: 0, maxInFlightBytes: 2 ** 50 });
    await expect(building).rejects.toBeInstanceOf(BuilderError);
    await expect(building).rejects.toMatchObject({ code: 'OUT_OF_MEMORY', message: expect.stringContaining('maxInFlightBytes'), context: { slabBytes: 2 ** 50 } });
  });
});

describe('a worker failure during one tensor', () => {
  it('keeps its WORKER_FAILED code and gains the tensor (it became TENSOR_FAILED, WORKER_FAILED only in its cause)', () => {
    const died = new BuilderError('WORKER_FAILED', 'calibration worker exited unexpectedly (code 7)');
    const wrapped = wrapBuildError(died, { tensor: 'layers.1.weight', file: 'model.safetensors' }) as BuilderError;
    expect(wrapped).toBeInstanceOf(BuilderError);
    expect(wrapped.code).toBe('WORKER_FAILED');
    expect(wrapped.context).toMatchObject({ tensor: 'layers.1.weight', file: 'model.safetensors' });
    expect(wrapped.message).toContain('layers.1.weight');
    expect(wrapped.cause).toBe(died); // the worker's error whole, stack included
    // Only a worker's failure: the builder's other errors, naming no tensor, go on as they are
    // (INTERRUPTED made TENSOR_FAILED would lose the CLI's exit code 130).
    const interrupted = new BuilderError('INTERRUPTED', 'stopped by SIGINT', { signal: 'SIGINT' });
    expect(wrapBuildError(interrupted, { tensor: 'layers.1.weight' })).toBe(interrupted);
  });

  it("a worker's failure to reserve memory is OUT_OF_MEMORY, not the tensor's TENSOR_FAILED", () => {
    for (const message of ['WebAssembly.Memory(): could not allocate memory', 'Array buffer allocation failed']) {
      const wrapped = wrapBuildError(new RangeError(message), { tensor: 'layers.2.weight' }) as BuilderError;
      expect(wrapped).toMatchObject({ code: 'OUT_OF_MEMORY', context: { tensor: 'layers.2.weight' } });
      expect(wrapped.message).toContain('--jobs');
    }
    expect(wrapBuildError(new RangeError('offset is out of bounds'), { tensor: 'layers.2.weight' })).toMatchObject({ code: 'TENSOR_FAILED' });
    // Words alone are not a refused reservation: a shard whose bytes say "Out of memory" is not one.
    expect(wrapBuildError(new Error('Out of memory'), { tensor: 'layers.2.weight' })).toMatchObject({ code: 'TENSOR_FAILED' });
  });
});

describe('a host process started with --input-type', () => {
  it('builds with worker threads (each inherited --input-type and failed: TENSOR_FAILED, WORKER_FAILED)', { timeout: 60_000 }, () => {
    const cacheDir = join(temp.path, 'input-type');
    const script = `
      import { buildCache } from ${JSON.stringify(fileURLToPath(new URL('../dist/index.js', import.meta.url)))};
      try { const report = await buildCache({ model: ${JSON.stringify(model)}, cacheDir: ${JSON.stringify(cacheDir)}, jobs: 2, inlineMaxBytes: 0 }); console.log('encoded', report.encoded, 'workers', report.workers); }
      catch (error) { console.log(error.code, error.message); }`;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 50_000 });
    expect(result.stdout.trim()).toMatch(/^encoded 3 workers [12]$/);
    expect(readdirSync(join(cacheDir, 'blobs')).length).toBeGreaterThan(0);
  });
});

describe('unknown options', () => {
  // A misspelt option was ignored: `rebind: true` (for rebindSlices) built without rebinding.
  it('buildCache, verifyModelCache and analyzeModel refuse a key they do not take (USAGE), naming the known ones', async () => {
    await expect(buildCache({ model: 'm', cacheDir: 'c', rebind: true } as never)).rejects.toMatchObject({
      code: 'USAGE',
      message: expect.stringMatching(/buildCache: unknown option "rebind" \(known: .*rebindSlices/),
    });
    await expect(buildCache({ model: 'm', cacheDir: 'c', coverageMn: 0.9 } as never)).rejects.toMatchObject({
      code: 'USAGE',
      message: expect.stringMatching(/unknown option "coverageMn": did you mean "coverageMin"\?/),
    });
    await expect(buildCache(null as never)).rejects.toMatchObject({ code: 'USAGE' });
    await expect(verifyModelCache({} as never, 'm', { coverageMin: 0.99, blocks: 4 } as never)).rejects.toMatchObject({ code: 'USAGE', message: expect.stringMatching(/"blocks"/) });
    await expect(analyzeModel('m', { coverageMin: 0.99, chunkSize: 1024, chunksize: 64 } as never)).rejects.toMatchObject({ code: 'USAGE', message: expect.stringMatching(/"chunksize"/) });
  });
});
