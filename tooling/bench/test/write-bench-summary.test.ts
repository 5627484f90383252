import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BENCH_DIR_ENV, BenchSummaryError, benchSummaryDir, benchSummaryPath, writeBenchSummary } from '../index.mjs';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bench-utils-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const ratioRow = { metric: 'decode vs copy', value: 0.93, unit: 'x', baseline: 'copy 6.10 GB/s', target: '>= 0.85x', met: true, note: '5.7 GB/s' };

function expectError(fn: () => unknown, code: string, messagePart: string): BenchSummaryError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(BenchSummaryError);
    const typed = error as BenchSummaryError;
    expect(typed.code).toBe(code);
    expect(typed.message).toContain(messagePart);
    return typed;
  }
  throw new Error('expected a BenchSummaryError');
}

describe('benchSummaryPath', () => {
  it('maps a scoped name to scope+name.json and an unscoped one to name.json', () => {
    expect(benchSummaryPath('@splitzip/codec', { dir })).toBe(join(dir, 'splitzip+codec.json'));
    expect(benchSummaryPath('plain-name', { dir })).toBe(join(dir, 'plain-name.json'));
  });

  it('rejects what is not an npm package name (no path tricks)', () => {
    for (const bad of ['', '../x', '@a/b/c', 'Upper', '@scope', 'a b', 'x'.repeat(215)]) {
      expectError(() => benchSummaryPath(bad, { dir }), 'INVALID_PACKAGE_NAME', 'not an npm package name');
    }
  });

  it('uses $SPLITZIP_BENCH_DIR when set, else <repo>/.cache/bench', () => {
    const saved = process.env[BENCH_DIR_ENV];
    try {
      process.env[BENCH_DIR_ENV] = dir;
      expect(benchSummaryDir()).toBe(dir);
      delete process.env[BENCH_DIR_ENV];
      expect(benchSummaryDir({ repoRoot: '/some/repo' })).toBe(join('/some/repo', '.cache', 'bench'));
    } finally {
      if (saved === undefined) delete process.env[BENCH_DIR_ENV];
      else process.env[BENCH_DIR_ENV] = saved;
    }
  });
});

describe('writeBenchSummary', () => {
  it('writes the rows with defaults filled in, the time and the machine, and returns what it wrote', () => {
    const before = Date.now();
    const { path, summary } = writeBenchSummary({
      packageName: '@splitzip/codec',
      title: 'codec throughput',
      rows: [ratioRow, { metric: 'encode', value: 3.2, unit: 'GB/s' }, { metric: 'GPU target', value: null, target: '> 1x', note: 'measured on the device only' }],
      environment: { backend: 'wasm-simd' },
      raw: [{ ms: 1 }],
      dir,
    });
    expect(path).toBe(join(dir, 'splitzip+codec.json'));
    const onDisk = JSON.parse(readFileSync(path, 'utf8'));
    expect(onDisk).toEqual(summary);
    expect(onDisk.package).toBe('@splitzip/codec');
    expect(onDisk.title).toBe('codec throughput');
    expect(Date.parse(onDisk.generatedAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(onDisk.generatedAt)).toBeLessThanOrEqual(Date.now() + 1000);
    expect(onDisk.environment).toMatchObject({ node: process.version, backend: 'wasm-simd' });
    expect(onDisk.environment.cores).toBeGreaterThan(0);
    expect(onDisk.rows).toEqual([
      ratioRow,
      { metric: 'encode', value: 3.2, unit: 'GB/s', baseline: '', target: null, met: null },
      { metric: 'GPU target', value: null, unit: '', baseline: '', target: '> 1x', met: null, note: 'measured on the device only' },
    ]);
    expect(onDisk.raw).toEqual([{ ms: 1 }]);
  });

  it('replaces an earlier file and leaves no temp file behind', () => {
    writeBenchSummary({ packageName: '@splitzip/codec', title: 'first', rows: [ratioRow], dir });
    writeBenchSummary({ packageName: '@splitzip/codec', title: 'second', rows: [{ ...ratioRow, value: 0.5, met: false }], dir });
    expect(readdirSync(dir)).toEqual(['splitzip+codec.json']);
    const onDisk = JSON.parse(readFileSync(join(dir, 'splitzip+codec.json'), 'utf8'));
    expect(onDisk.title).toBe('second');
    expect(onDisk.rows[0]).toMatchObject({ value: 0.5, met: false });
  });

  it('writes to outFile when given, creating its folder', () => {
    const outFile = join(dir, 'nested', 'custom.json');
    const { path } = writeBenchSummary({ packageName: '@splitzip/runtime', title: 't', rows: [ratioRow], outFile });
    expect(path).toBe(outFile);
    expect(JSON.parse(readFileSync(outFile, 'utf8')).package).toBe('@splitzip/runtime');
  });

  it.each([
    ['no rows', { rows: [] }, 'rows must be a non-empty array'],
    ['no title', { title: '' }, 'title must be a non-empty string'],
    ['NaN value', { rows: [{ ...ratioRow, value: Number.NaN }] }, 'must be a finite number or null'],
    ['infinite value', { rows: [{ ...ratioRow, value: Infinity }] }, 'must be a finite number or null'],
    ['string value', { rows: [{ ...ratioRow, value: '0.9' }] }, 'must be a finite number or null'],
    ['unknown key (typo)', { rows: [{ ...ratioRow, targt: '>= 1x' }] }, 'unknown key "targt"'],
    ['met without target', { rows: [{ metric: 'm', value: 1, met: true }] }, 'needs a target and a measured value'],
    ['met without a value', { rows: [{ metric: 'm', value: null, target: '>= 1x', met: false }] }, 'needs a target and a measured value'],
    ['met as text', { rows: [{ ...ratioRow, met: 'yes' }] }, 'must be true, false or null'],
    ['empty metric', { rows: [{ ...ratioRow, metric: '' }] }, 'metric must be a non-empty string'],
    ['row not an object', { rows: [ratioRow, 3] }, 'rows[1] must be an object'],
  ])('rejects %s and writes nothing', (_label, override, messagePart) => {
    const options = { packageName: '@splitzip/codec', title: 'codec', rows: [ratioRow], dir, ...override };
    const error = expectError(() => writeBenchSummary(options as Parameters<typeof writeBenchSummary>[0]), 'INVALID_SUMMARY', messagePart);
    expect(error.details.packageName).toBe('@splitzip/codec');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('reports the row index of a bad row', () => {
    const error = expectError(
      () => writeBenchSummary({ packageName: '@splitzip/codec', title: 'c', rows: [ratioRow, { ...ratioRow, value: Number.NaN }], dir }),
      'INVALID_SUMMARY',
      'rows[1].value (decode vs copy)',
    );
    expect(error.details.rowIndex).toBe(1);
  });

  it('turns a file-system failure into IO_ERROR with the file, leaving nothing behind', () => {
    const blocker = join(dir, 'not-a-folder');
    writeFileSync(blocker, 'x');
    const error = expectError(
      () => writeBenchSummary({ packageName: '@splitzip/codec', title: 'c', rows: [ratioRow], dir: blocker }),
      'IO_ERROR',
      'could not write',
    );
    expect(error.details.file).toBe(join(blocker, 'splitzip+codec.json'));
    expect(readdirSync(dir)).toEqual(['not-a-folder']);
  });

  it('removes its temp file when the final rename fails', () => {
    const target = join(dir, 'occupied.json');
    mkdirSync(target); // a folder where the file should go: the write succeeds, the rename cannot
    expectError(() => writeBenchSummary({ packageName: '@splitzip/codec', title: 'c', rows: [ratioRow], outFile: target }), 'IO_ERROR', target);
    expect(readdirSync(dir)).toEqual(['occupied.json']);
    expect(readdirSync(target)).toEqual([]);
  });
});
