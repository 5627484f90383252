// The text reports of build, stats and verify on the default model (tensor names of ~150 columns)
// stay within 120 columns, a tensor name wider than a line folded (after a `/` or `.`; before
// 2026-12-07 printed whole on its own line, to ~180 columns): build's rows
// ran to 253 columns, stats' to 279 and its `tensors` line to 161, verify's FAIL lines to ~340
// (the entry's key twice), its notes to ~750. And their counts read as English: `1 problem`,
// `1 new entry`, thousands separators; the repair hint names the model given with --model.
import { cp, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ensureDefaultModel } from '@splitzip/default-model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuildReport } from '../src/build-cache.js';
import { renderBuildReport } from '../src/commands/build.js';
import { renderVerifyReport, type VerifyCommandReport } from '../src/commands/verify.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

let temp: TempDir;
let model: string;
let names: string[];
beforeAll(async () => {
  temp = await createTempDir('splitzip-text-widths-');
  model = await ensureDefaultModel({ outDir: join(temp.path, 'default-model') });
  const built = await runInProcess(['stats', model, '--quiet', '--json']);
  expect(built.code, built.err).toBe(0);
  names = (JSON.parse(built.out) as { tensors: { name: string }[] }).tensors.map((tensor) => tensor.name);
}, 120_000);
afterAll(async () => temp?.cleanup());

/** The lines over 120 columns (a long tensor name's too: it folds). */
function overlong(text: string): string[] {
  return text.split('\n').filter((line) => line.length > 120);
}

/** A stacked table's first cells (tensor names), each with the pieces folded under it (4 columns in) joined back. */
function firstCells(text: string): string[] {
  const cells: string[] = [];
  let inName = false;
  for (const line of text.split('\n')) {
    if (inName && /^ {4}\S/.test(line)) cells[cells.length - 1] += line.slice(4);
    else {
      inName = /^\S/.test(line);
      if (inName) cells.push(line);
    }
  }
  return cells;
}

const ORPHAN_NOTE = /^ {2}note: 1 orphan blob /m;

describe('text report widths', () => {
  it('build: the per-tensor table and the summary within 120 columns, every tensor named (its pieces joined: the name)', async () => {
    const built = await runInProcess(['build', model, '--out', join(temp.path, 'c-build'), '--jobs', '2']);
    expect(built.code, built.err).toBe(0);
    expect(overlong(built.out)).toEqual([]);
    const cells = firstCells(built.out);
    expect(names.some((name) => name.length > 120)).toBe(true);
    for (const name of names) expect(cells.includes(name), name).toBe(true);
    // A model this small is encoded on the main thread: `0 of 2 jobs` said nothing of that.
    expect(built.out).toMatch(/, encoded on the main thread \(0 of 2 worker threads used\)$/m);
  });

  it('stats: the table and the totals within 120 columns, counts with thousands separators', async () => {
    const stats = await runInProcess(['stats', model, '--quiet']);
    expect(stats.code, stats.err).toBe(0);
    expect(overlong(stats.out)).toEqual([]);
    // A size wraps whole: `10.0` ended a line and `MiB` began the next.
    expect(stats.out).not.toMatch(/\d\n +(B|KiB|MiB|GiB)\b/);
    expect(stats.out.replace(/\n {10}/g, ' ')).toMatch(/ \d{1,3}(,\d{3})* escapes of \d{1,3}(,\d{3})+ values$/m);
  });

  it('verify --model, a blob missing: the key once, FAIL and notes wrapped, the repair hint naming the model', async () => {
    const cache = join(temp.path, 'c verify');
    expect((await runInProcess(['build', model, '--out', cache, '--quiet'])).code).toBe(0);
    // A copy of the model (files the cache has no record of) in a folder whose name needs quoting.
    const copy = join(temp.path, "the model's copy");
    await cp(model, copy, { recursive: true });
    const copied = copy;
    const blobs = (await readdir(join(cache, 'blobs'))).filter((name) => name.endsWith('.bin'));
    const key = blobs[0]!.replace(/\.bin$/, '');
    await rm(join(cache, 'blobs', blobs[0]!));
    const verified = await runInProcess(['verify', cache, '--model', copied, '--no-decode']);
    expect(verified.code, verified.err).toBe(1);
    expect(overlong(verified.out)).toEqual([]);
    expect(verified.out).toMatch(/ read, 1 problem$/m);
    const storeFail = verified.out.slice(verified.out.indexOf('  FAIL entry'), verified.out.indexOf('\n  blobs missing'));
    // Named by the FAIL line and its blob's file name, not a third time as `(entry <key>, file …)`.
    expect(storeFail.split(key)).toHaveLength(3);
    expect(storeFail).not.toContain(`entry ${key},`);
    // The code after the entry's tensor name (folded: its last piece, or its line).
    expect(storeFail).toMatch(/^ {8}\S*\): BLOB_MISSING: /m);
    const hint = verified.out.slice(verified.out.indexOf('  blobs missing')).replace(/\n {4}/g, ' ');
    expect(hint).toContain(`\`splitzip build '${copy.replaceAll("'", "'\\''")}' --out '${cache}' --repair\``);
    // The copy's files: one short line per shard under one note, no causes guessed, no API options.
    expect(verified.out).toMatch(/^ {4}model-00001-of-00003\.safetensors: \d+ tensors$/m);
    expect(verified.out).not.toMatch(/readThroughDir|a copy|a touched file/);
  });
});

describe('verify text report, rendered', () => {
  const store = { ok: true, checked: 1, passed: 1, decoded: 1, bytesRead: 0, generation: 0, durationMs: 1, problems: [] };
  const longName = `model.layers.0.mlp.experts.0.${'very_long_projection_name.'.repeat(4)}weight`;
  const tensor = (name: string, status: 'ok' | 'not_cached', reason: string | null, extra: object = {}) => ({
    name,
    dtype: 'BF16',
    shard: 'model-00001-of-00002.safetensors',
    offsetBytes: 0,
    sizeBytes: 2,
    key: null,
    status,
    reason,
    ...extra,
  });
  const render = (cache: string, tensors: ReturnType<typeof tensor>[], leftovers: VerifyCommandReport['leftovers'] = null): string =>
    renderVerifyReport({
      cache,
      ok: true,
      store,
      leftovers,
      model: { model: 'm', ok: true, coverageMin: 0.99, tensors, totals: { tensors: tensors.length, ok: 0, not_cached: 0, failed: 0, checked_bytes: 0 } },
    });

  it('an s3:// cache built from local files: one short line per shard, saying its bindings carry no file stamps by design', () => {
    const reason = `its bytes are the entry's; ${'an s3:// cache keeps no local file stamps '.repeat(12)}`;
    const text = render('s3://bkt/c1', [tensor('a', 'ok', reason, { unrecorded: true }), tensor('b', 'ok', reason, { unrecorded: true })]);
    expect(text).toContain('  note: cached; an s3:// cache keeps no local file stamps (by design), so a load checks these once per host:\n    model-00001-of-00002.safetensors: 2 tensors\n');
    expect(text.split('\n').filter((line) => line.length > 120)).toEqual([]);
    expect(text).toMatch(/: 1 entry checked, .*, 0 problems$/m);
  });

  it('not cached: no stray `tensor` / `reason` header above names too long for a table; an orphan note within 120 columns', () => {
    const text = render('/a/cache/dir/of/some/length/to/make/the/note/long', [tensor(longName, 'not_cached', 'Top-16 coverage 0.9 < 0.99')], {
      orphanBlobs: ['blobs/x.bin'],
      orphanBytes: 1024,
      staleLocks: [],
      tempFiles: [],
    });
    const lines = text.split('\n');
    // The name folded after a `.`, deeper (8 columns) than its reason (6).
    expect(lines.slice(lines.indexOf('  not cached, BF16:') + 1, -2)).toEqual([
      `    model.layers.0.mlp.experts.0.${'very_long_projection_name.'.repeat(3)}`,
      '        very_long_projection_name.weight',
      '      Top-16 coverage 0.9 < 0.99',
    ]);
    expect(text).toMatch(ORPHAN_NOTE);
    expect(lines.filter((line) => line.length > 120)).toEqual([]);
  });

  it('a short name keeps its table', () => {
    const text = render('c', [tensor('w', 'not_cached', 'Top-16 coverage 0.9 < 0.99')]);
    expect(text).toContain('    tensor  reason\n    ------  --------------------------\n    w       Top-16 coverage 0.9 < 0.99\n');
  });
});

describe('build text report counts', () => {
  it('1 new entry, 1 slice binding', async () => {
    const path = await writeSingleFileModel(join(temp.path, 'one.safetensors'), [gaussianBf16('w', [64, 64], 7)]);
    const built = await runInProcess(['build', path, '--out', join(temp.path, 'c-one'), '--quiet', '--jobs', '0']);
    expect(built.code, built.err).toBe(0);
    expect(built.out).toMatch(/^wrote {3}.* in 1 new entry, 1 slice binding$/m);
    expect(built.out).toMatch(/, encoded on the main thread \(--jobs 0\)$/m);
  });

  it("a damaged journal's recovery: 1 intact record, and counts past 999 with separators", async () => {
    const path = await writeSingleFileModel(join(temp.path, 'two.safetensors'), [gaussianBf16('w', [64, 64], 8)]);
    const built = await runInProcess(['build', path, '--out', join(temp.path, 'c-two'), '--quiet', '--jobs', '0', '--json']);
    expect(built.code, built.err).toBe(0);
    const report = JSON.parse(built.out) as BuildReport;
    const journal = { journal: 'journal.1', keptAs: 'journal.1.damaged', generation: 1, damagedFromOffsetBytes: 10, salvagedRecords: 1, droppedRecords: 1_234, droppedOps: 1, reason: 'x' };
    const text = renderBuildReport({ ...report, journal_recovered: journal }, { tensors: false }).replace(/\n {8}/g, ' ');
    expect(text).toContain('1 intact record after it kept, 1,234 unreadable');
    // The skip counts too (`1234 skipped (would not shrink)` until 2026-12-07).
    const skips = renderBuildReport({ ...report, skipped_size: 1_500, skipped_no_gain: 1_234 }, { tensors: false }).replace(/\n {8}/g, ' ');
    expect(skips).toContain(', 1,500 skipped (too large), 1,234 skipped (would not shrink)');
  });
});
