// bin/load-default-model.mjs, scripts/main.sh's last step, printed a Markdown table whose time rows
// ran to 129 and 149 columns (a long model or cache path further), where the builder's reports before
// it keep within 120. Its rows now wrap under their column, a long path or tensor name folded after a
// `/` or `.` (bin/format-report-lines.mjs, local to the script: the runtime does not import the
// builder). The script runs as main.sh runs it: a separate process, the built package.
import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { buildCache, makeTempDir, standardTensors, writeModel } from './fixtures.js';

interface FormatReportLines {
  REPORT_LINE_COLUMNS: number;
  foldWord(word: string, firstColumns: number, columns: number): string[];
  wrapText(text: string, firstColumns: number, columns?: number): string[];
  formatKeyValueLines(rows: [string, string][], columns?: number): string[];
  formatNoteLines(text: string, columns?: number): string[];
}
const helpers = (await import(pathToFileURL(fileURLToPath(new URL('../bin/format-report-lines.mjs', import.meta.url))).href)) as FormatReportLines;

/** Lines over 120 characters (code points, as `awk length` counts them in a UTF-8 locale). */
const overlong = (lines: readonly string[]): string[] => lines.filter((line) => [...line].length > 120);

const LONG_PATH = `/data/${'a-rather-long-directory-of-checkpoints/'.repeat(4)}model.safetensors.index.json`; // 200 columns
const NAME = `model.language_model.layers.47.mlp.experts.127.${'gate_up_projection_block.'.repeat(4)}weight_scale_inv`; // 163

describe('format-report-lines.mjs', () => {
  it('folds a word wider than a line after a `/` or `.` past half of it, else at the limit; the pieces joined are the word', () => {
    const path = helpers.foldWord(LONG_PATH, 80, 80);
    expect(path.join('')).toBe(LONG_PATH);
    for (const piece of path.slice(0, -1)) {
      expect(piece.endsWith('/')).toBe(true);
      expect(piece.length).toBeLessThanOrEqual(80);
      expect(piece.length).toBeGreaterThan(40);
    }
    expect(helpers.foldWord('w'.repeat(25), 10, 8)).toEqual(['w'.repeat(10), 'w'.repeat(8), 'w'.repeat(7)]);
    expect(helpers.foldWord(`a.${'b'.repeat(20)}`, 10, 10)).toEqual([`a.${'b'.repeat(8)}`, 'b'.repeat(10), 'b'.repeat(2)]);
    expect(helpers.foldWord('层'.repeat(5), 2, 2)).toEqual(['层层', '层层', '层']);
  });

  it('rows: results wrap under their column within 120; keys too wide for the line stack their results below them', () => {
    const rows: [string, string][] = [
      ['model', `${LONG_PATH} (61 tensors, 13.95 MB)`],
      ['load time: cache vs raw safetensors', '29.7 ms vs 15.3 ms (medians of 15 rounds after 3 warm-up loads, files in the page cache)'],
      ['decode backend', 'threads:2'],
    ];
    const lines = helpers.formatKeyValueLines(rows);
    expect(overlong(lines)).toEqual([]);
    expect(lines[0]!.startsWith(`model${' '.repeat(32)}/data/`)).toBe(true);
    const hang = ' '.repeat(37);
    expect(lines.slice(1).every((line) => line.startsWith(hang) || /^\S/.test(line))).toBe(true);
    expect(lines.join('\n').replace(new RegExp(`\\n${hang}`, 'g'), '')).toContain(LONG_PATH);
    expect(lines.at(-1)).toBe(`decode backend${' '.repeat(23)}threads:2`);
    // A key column that leaves under 40 columns: each key on its line, its result 2 columns in.
    const stacked = helpers.formatKeyValueLines([['k'.repeat(100), 'a result of a few words']]);
    expect(stacked).toEqual(['k'.repeat(100), '  a result of a few words']);
    const notes = helpers.formatNoteLines(`fallback: ${NAME}: CACHE_READ_FAILED: the blob at ${LONG_PATH} could not be read`);
    expect(overlong(notes)).toEqual([]);
    expect(notes.slice(1).every((line) => line.startsWith('  '))).toBe(true);
    expect(notes.join('\n').replace(/\n {2}/g, '')).toContain(NAME);
  });
});

describe('bin/load-default-model.mjs', () => {
  let model: SafetensorsModel;
  let modelIndex: string;
  let cacheDir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const temp = await makeTempDir('load-default-output');
    cleanup = temp.cleanup;
    // A model and cache at long paths, as a user's checkpoint directory can be.
    const deep = `${temp.dir}/${'a-rather-long-directory-of-checkpoints/'.repeat(3)}`;
    await mkdir(deep, { recursive: true });
    model = await writeModel(`${deep}model`, standardTensors());
    modelIndex = `${deep}model/model.safetensors.index.json`;
    cacheDir = `${deep}cache`;
    await buildCache(model, cacheDir);
  });
  afterAll(async () => {
    await model?.close();
    await cleanup?.();
  });

  it('prints every line within 120 columns; each row whole once its wrapped lines are joined', async () => {
    const script = fileURLToPath(new URL('../bin/load-default-model.mjs', import.meta.url));
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [script, '--model', modelIndex, '--cache', cacheDir], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (chunk) => (out += chunk));
      child.stderr.on('data', (chunk) => (err += chunk));
      child.on('error', reject);
      child.on('exit', (exitCode) => resolve({ code: exitCode, stdout: out, stderr: err }));
    });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(overlong(lines)).toEqual([]);
    expect(lines.some((line) => [...line].length > 100)).toBe(true); // the long paths and time rows did need wrapping
    const unwrapped = stdout.replace(/\n {37}/g, '¶');
    expect(unwrapped.replace(/¶/g, '')).toContain(modelIndex);
    expect(unwrapped.replace(/¶/g, '')).toContain(cacheDir);
    const rows = unwrapped.replace(/¶(?=\S)/g, ' ').split('\n');
    expect(rows[0]).toMatch(/^model {32}\S/);
    expect(rows).toContain(`tensors from cache / raw${' '.repeat(13)}9 / 3 (raw: dtype 2, coverage 1)`);
    expect(rows.find((row) => row.startsWith('load time: cache vs raw safetensors  '))).toMatch(/ ms vs .* ms \(medians of 15 rounds after 3 warm-up loads, files in the page cache\)$/);
    expect(rows.find((row) => row.startsWith('the same through a 1 GB/s link'))).toMatch(/x as fast \(the pacing reader, medians of 15 rounds after 3 warm-up loads\)$/);
    expect(rows).toContain(`bit-identical to the safetensors${' '.repeat(5)}yes, all 12 tensors`);
  }, 120_000);
});
