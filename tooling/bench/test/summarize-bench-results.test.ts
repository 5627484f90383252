import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BenchSummary } from '../index.mjs';
import { formatBenchValue, readBenchSummaries, summarizeBenchResults, writeBenchSummary } from '../index.mjs';

const NOW_MS = Date.parse('2026-12-02T16:00:00.000Z');
const HOUR_MS = 3600_000;

function summary(name: string, ageMs: number, rows: BenchSummary['rows']): BenchSummary {
  return { package: name, title: name, generatedAt: new Date(NOW_MS - ageMs).toISOString(), environment: {}, rows };
}
const row = (metric: string, value: number | null, met: boolean | null, target: string | null = met === null ? null : '>= 1x') => ({
  metric,
  value,
  unit: 'x',
  baseline: 'copy',
  target,
  met,
});

describe('summarizeBenchResults', () => {
  it('lists a package with a bench script but no results as such, never as met', () => {
    const result = summarizeBenchResults({ benchPackages: ['@s/a', '@s/b'], summaries: new Map([['@s/a', summary('@s/a', 0, [row('m', 1.5, true)])]]), nowMs: NOW_MS });
    expect(result.missing).toEqual(['@s/b']);
    expect(result.rows.find((r) => r.package === '@s/b')).toMatchObject({ met: '?', value: '' });
    expect(result).toMatchObject({ targetsMet: 1, targetsJudged: 1 });
  });

  it('counts met and unmet targets, not rows without a target or with met null', () => {
    const rows = [row('a', 1.2, true), row('b', 0.4, false), row('c', 3, null), row('d', null, null, '> 1x')];
    const result = summarizeBenchResults({ benchPackages: ['@s/a'], summaries: new Map([['@s/a', summary('@s/a', 0, rows)]]), nowMs: NOW_MS });
    expect(result).toMatchObject({ targetsMet: 1, targetsJudged: 2, missing: [], stale: [] });
    expect(result.rows.map((r) => [r.metric, r.value, r.target, r.met])).toEqual([
      ['a', '1.20x', '>= 1x', 'yes'],
      ['b', '0.40x', '>= 1x', 'NO'],
      ['c', '3.00x', '—', '—'],
      ['d', 'n/a', '> 1x', '—'],
    ]);
  });

  it('marks old or undated results stale and does not count their targets', () => {
    const old = summary('@s/old', 5 * HOUR_MS, [row('m', 2, true)]);
    const undated = { ...summary('@s/undated', 0, [row('m', 2, true)]), generatedAt: 'yesterday' };
    const result = summarizeBenchResults({
      benchPackages: [],
      summaries: new Map([
        ['@s/old', old],
        ['@s/undated', undated],
      ]),
      nowMs: NOW_MS,
      maxAgeMs: 3 * HOUR_MS,
    });
    expect(result.stale).toEqual(['@s/old', '@s/undated']);
    expect(result).toMatchObject({ targetsMet: 0, targetsJudged: 0 });
    expect(result.rows[0]?.note).toContain('[stale: 5.0 h old]');
    expect(result.rows[1]?.note).toContain('[stale: no time]');
  });

  it('keeps results of a package that no longer declares a bench script, sorted by name', () => {
    const result = summarizeBenchResults({ benchPackages: ['@s/z'], summaries: new Map([['@s/a', summary('@s/a', 0, [row('m', 1, null)])]]), nowMs: NOW_MS });
    expect(result.rows.map((r) => r.package)).toEqual(['@s/a', '@s/z']);
  });
});

describe('formatBenchValue', () => {
  it.each([
    [{ value: 1.234, unit: 'x' }, '1.23x'],
    [{ value: 8.8, unit: 'GB/s' }, '8.80 GB/s'],
    [{ value: 12.34, unit: 'ms' }, '12.3 ms'],
    [{ value: 1234.5, unit: 'MB' }, '1235 MB'],
    [{ value: 0.00012, unit: 'of raw' }, '1.20e-4 of raw'],
    [{ value: 0, unit: '' }, '0.00'],
    [{ value: null, unit: 'x' }, 'n/a'],
    [{ value: 'fast', unit: 'x' }, 'n/a'],
  ])('%j → %s', (input, expected) => {
    expect(formatBenchValue(input)).toBe(expected);
  });
});

describe('readBenchSummaries', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'bench-read-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads what writeBenchSummary wrote, reports foreign files and ignores temp files', () => {
    writeBenchSummary({ packageName: '@s/a', title: 'a', rows: [row('m', 1, true)], dir });
    writeFileSync(join(dir, 'broken.json'), '{"package": "@s/b", "rows": [');
    writeFileSync(join(dir, 'other.json'), '{"hello": 1}');
    writeFileSync(join(dir, '.s+c.json.123.abc.tmp'), '{');
    const { summaries, problems } = readBenchSummaries(dir);
    expect([...summaries.keys()]).toEqual(['@s/a']);
    expect(problems.map((p) => p.file)).toEqual(['broken.json', 'other.json']);
    expect(problems[0]?.reason).toContain('unreadable');
  });

  it('keeps the newer of two files for one package', () => {
    writeFileSync(join(dir, 'a-old.json'), JSON.stringify(summary('@s/a', 2 * HOUR_MS, [row('old', 1, null)])));
    writeFileSync(join(dir, 'b-new.json'), JSON.stringify(summary('@s/a', 0, [row('new', 1, null)])));
    writeFileSync(join(dir, 'c-older.json'), JSON.stringify(summary('@s/a', 3 * HOUR_MS, [row('older', 1, null)])));
    expect(readBenchSummaries(dir).summaries.get('@s/a')?.rows[0]?.metric).toBe('new');
  });

  it('returns nothing for a folder that does not exist', () => {
    const { summaries, problems } = readBenchSummaries(join(dir, 'missing'));
    expect(summaries.size).toBe(0);
    expect(problems).toEqual([]);
  });
});
