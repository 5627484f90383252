// The text reports of inspect and verify --model on the default model, whose tensor names run to
// ~150 columns: their lines ran to ~300 (a padded name column, a reason column of 150), and now
// stay within 120 columns, a tensor name wider than a line folded after a `/` (until 2026-12-07
// printed whole on its own line, to ~180 columns).
import { join } from 'node:path';
import { ensureDefaultModel } from '@splitzip/default-model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

let temp: TempDir;
let model: string;
let cache: string;
let encoded: string[];
beforeAll(async () => {
  temp = await createTempDir('splitzip-report-widths-');
  model = await ensureDefaultModel({ outDir: join(temp.path, 'default-model') });
  cache = join(temp.path, 'cache');
  const built = await runInProcess(['build', model, '--out', cache, '--quiet', '--jobs', '0', '--json']);
  expect(built.code, built.err).toBe(0);
  const tensors = (JSON.parse(built.out) as { tensors: { name: string; status: string }[] }).tensors;
  encoded = tensors.filter((tensor) => tensor.status === 'encoded').map((tensor) => tensor.name);
}, 120_000);
afterAll(async () => temp?.cleanup());

/** The lines over 120 columns (a long tensor name's too: it folds). */
function overlong(text: string): string[] {
  return text.split('\n').filter((line) => line.length > 120);
}

describe('report widths', () => {
  it('inspect: every entry named (a long name folded, its pieces 4 columns in), its row within 120 columns', async () => {
    const inspected = await runInProcess(['inspect', cache]);
    expect(inspected.code, inspected.err).toBe(0);
    expect(overlong(inspected.out)).toEqual([]);
    const lines = inspected.out.replace(/\n {4}(?=\S)/g, '').split('\n');
    expect(encoded.some((name) => name.length > 120)).toBe(true);
    for (const name of encoded) expect(lines.some((line) => line.startsWith(name)), name).toBe(true);
  });

  it('verify --model: the not-cached tensors named whole with their reasons, within 120 columns', async () => {
    const verified = await runInProcess(['verify', cache, '--model', model, '--no-decode']);
    expect(verified.code, verified.err).toBe(0);
    expect(overlong(verified.out)).toEqual([]);
    expect(verified.out).toMatch(/Top-16 coverage 0\.9\d+ < 0\.99/);
  });
});
