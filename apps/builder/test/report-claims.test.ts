// What build's and verify's text reports claim stays true: a build that encoded nothing does not
// say it `encoded on the main thread`, and a repair hint's command keeps a quoted path with spaces
// on one line (wrapped inside them, a copied command named another path).
import { describe, expect, it } from 'vitest';
import type { BuildReport } from '../src/build-cache.js';
import { renderBuildReport } from '../src/commands/build.js';
import { renderVerifyReport, type VerifyCommandReport } from '../src/commands/verify.js';

const buildReport = (encoded: number, jobs: number, workers: number): BuildReport =>
  ({
    model: 'm.safetensors',
    cache: 'c',
    tensors: [],
    encoded,
    cached: 3 - encoded,
    skipped_coverage: 0,
    skipped_dtype: 0,
    skipped_size: 0,
    skipped_no_gain: 0,
    unaliased: 0,
    coverage_min: 0.99,
    raw_bytes: 6,
    comp_bytes: 6,
    stored_bytes: 0,
    ratio: 1,
    aliased: 0,
    repaired: 0,
    journal_recovered: null,
    manifest_recovered: null,
    temp_files_removed: 0,
    temp_bytes_removed: 0,
    elapsed_s: 1,
    backend: 'codec',
    backend_requested: 'auto',
    fallback_reason: null,
    jobs,
    workers,
    dtypes: {},
  }) as unknown as BuildReport;

describe('build: the worker threads line', () => {
  it('a build that encoded nothing (all cached) does not say it encoded on the main thread', () => {
    const text = renderBuildReport(buildReport(0, 2, 0), { tensors: false });
    expect(text).not.toMatch(/encoded on the main thread/);
    expect(text).toMatch(/0 of 2 worker threads used \(nothing encoded\)$/m);
    expect(renderBuildReport(buildReport(0, 0, 0), { tensors: false })).not.toMatch(/encoded on the main thread/);
  });

  it('one that encoded on the main thread still says so', () => {
    expect(renderBuildReport(buildReport(3, 2, 0), { tensors: false })).toMatch(/, encoded on the main thread \(0 of 2 worker threads used\)$/m);
    expect(renderBuildReport(buildReport(3, 0, 0), { tensors: false })).toMatch(/, encoded on the main thread \(--jobs 0\)$/m);
  });
});

describe('verify: a repair hint with a quoted path', () => {
  it('keeps each quoted path on one line (the command wraps between its words)', () => {
    const model = `/data/my models/${'long folder name '.repeat(2)}x/model.safetensors.index.json`;
    const cache = '/var/cache/split zip';
    const report = {
      cache,
      ok: false,
      store: {
        ok: false,
        checked: 1,
        passed: 0,
        decoded: 0,
        bytesRead: 0,
        generation: 0,
        durationMs: 1,
        problems: [{ key: 'k', qualname: 'w', code: 'BLOB_MISSING', message: 'BLOB_MISSING: blob missing' }],
      },
      leftovers: null,
      model: { model, ok: true, coverageMin: 0.99, tensors: [], totals: { tensors: 0, ok: 0, not_cached: 0, failed: 0, checked_bytes: 0 } },
    } as unknown as VerifyCommandReport;
    const text = renderVerifyReport(report);
    const lines = text.split('\n');
    expect(lines.some((line) => line.includes(`'${model}'`))).toBe(true);
    expect(lines.some((line) => line.includes(`'${cache}'`))).toBe(true);
    expect(lines.filter((line) => line.length > 120)).toEqual([]);
  });
});

describe('verify: a large model of one shard', () => {
  // Each tensor copied its shard's list (`[...list, t]`): 20,000 took 8.6 s here, 200,000 hours.
  const many = (status: 'ok' | 'failed', extra: object) =>
    Array.from({ length: 200_000 }, (_, i) => ({ name: `t${i}`, dtype: 'BF16', shard: 's.safetensors', offsetBytes: 2 * i, sizeBytes: 2, key: null, status, reason: 'r', ...extra }));
  const render = (tensors: ReturnType<typeof many>): string =>
    renderVerifyReport({
      cache: 'c',
      ok: true,
      store: { ok: true, checked: 0, passed: 0, decoded: 0, bytesRead: 0, generation: 0, durationMs: 1, problems: [] },
      leftovers: null,
      model: { model: 'm', ok: true, coverageMin: 0.99, tensors, totals: { tensors: tensors.length, ok: 0, not_cached: 0, failed: 0, checked_bytes: 0 } },
    } as unknown as VerifyCommandReport);

  it('200,000 unrecorded tensors: one line for their shard', () => {
    expect(render(many('ok', { unrecorded: true }))).toContain('\n    s.safetensors: 200,000 tensors\n');
  });

  it('200,000 stale tensors: one FAIL line for their shard', () => {
    expect(render(many('failed', { stale: true }))).toMatch(/^ {2}FAIL 200,000 tensors of s\.safetensors /m);
  });
});

describe('verify: a repair hint for a model path starting with -', () => {
  it('names it as ./-x, not as an option', () => {
    const text = renderVerifyReport({
      cache: 'c',
      ok: false,
      store: { ok: false, checked: 1, passed: 0, decoded: 0, bytesRead: 0, generation: 0, durationMs: 1, problems: [{ key: 'k', qualname: 'w', code: 'BLOB_MISSING', message: 'BLOB_MISSING: blob missing' }] },
      leftovers: null,
      model: { model: '-my model', ok: true, coverageMin: 0.99, tensors: [], totals: { tensors: 0, ok: 0, not_cached: 0, failed: 0, checked_bytes: 0 } },
    } as unknown as VerifyCommandReport);
    expect(text).toContain("`splitzip build './-my model' --out c --repair`");
  });
});

describe('build: the format line', () => {
  const moved = (cache: string, formatMoved: boolean, objectFormatMoved: boolean): string[] =>
    renderBuildReport({ ...buildReport(1, 0, 0), cache, cache_format_moved: formatMoved, cache_object_format_moved: objectFormatMoved }, { tensors: false })
      .replace(/\n {8}/g, ' ')
      .split('\n')
      .filter((line) => line.startsWith('format  '));

  it('an s3:// cache moved to cache.json format 2 says so (it said manifest format 3, which an s3:// cache has none of)', () => {
    const lines = moved('s3://bucket/caches/m', true, false);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('its cache.json is written as format 2, which releases up to 0.56 can no longer read (UNSUPPORTED_FORMAT)');
    expect(lines[0]).not.toContain('manifest');
  });

  it('a directory cache moved to format 3 and 4 by one build: one line, of format 4 (both lines before)', () => {
    expect(moved('/caches/m', true, true)).toEqual([
      'format  the cache now binds a slice for an s3:// object beside another revision: it is written as manifest format 4, which releases up to 0.57 can no longer read (UNSUPPORTED_FORMAT); keep them off this cache',
    ]);
  });

  it('a directory cache moved to format 3 only, or to 4 from 3: the line of that format', () => {
    expect(moved('/caches/m', true, false)).toEqual([
      'format  the cache now binds a slice for more than one file (revisions side by side): it is written as manifest format 3, which releases before 0.56 can no longer read (UNSUPPORTED_FORMAT); keep them off this cache',
    ]);
    expect(moved('/caches/m', false, true)).toHaveLength(1);
    expect(moved('/caches/m', false, true)[0]).toContain('manifest format 4');
    expect(moved('/caches/m', false, false)).toEqual([]);
  });
});
