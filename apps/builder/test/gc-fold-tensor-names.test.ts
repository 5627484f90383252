// gc --drop-unbound-entries lists each entry it drops as `  <key> <name> (<size>)`: with a long
// tensor name that line ran past 120 columns (~220 for a 163-column name), where build, inspect,
// stats and verify fold such names (foldTensorName). It folds the same way now: the name starts a
// line of its own and folds where it is wider than one, its pieces and the size 6 columns in; the
// pieces joined give the name back, and --json keeps it whole.
import { join } from 'node:path';
import { openCacheStore, type CacheEntry } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderDroppedEntry, type GcCommandReport } from '../src/commands/gc.js';
import { displayWidth } from '../src/display-width.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

const DOTTED = `model.language_model.layers.47.mlp.experts.127.${'gate_up_projection_block.'.repeat(4)}weight_scale_inv`; // 163 columns
const MEDIUM = 'model.language_model.layers.47.mlp.experts.127.down_proj.weight_scale_inv'; // 73: fits after a key, not with its size
const LONGER = `${MEDIUM}.shard_0000000`; // 87: fits a line, not after a key
const KEY = 'f'.repeat(40); // a SHA-1 content key

/** The lines over `columns` columns. */
const overlong = (text: string, columns = 120): string[] => text.split('\n').filter((line) => displayWidth(line) > columns);

/** The text of the lines from the one starting `  <key>` on, while they are 6 columns in: key, name and size, unfolded. */
function unfoldEntry(lines: readonly string[], key: string): string {
  const at = lines.findIndex((line) => line.startsWith(`  ${key}`));
  expect(at, key).toBeGreaterThanOrEqual(0);
  let text = lines[at]!.slice(2);
  for (let next = at + 1; next < lines.length && /^ {6}\S/.test(lines[next]!); next++) text += `\n${lines[next]!.slice(6)}`;
  return text;
}

describe("gc's dropped-entry lines", () => {
  it('stay whole where they fit; a name that does not starts a line, folded where wider than one', () => {
    expect(renderDroppedEntry({ key: KEY, qualname: 'b.weight', compBytes: 6656 })).toEqual([`  ${KEY} b.weight (6.50 KiB)`]);
    expect(renderDroppedEntry({ key: KEY, qualname: MEDIUM, compBytes: 6656 })).toEqual([`  ${KEY} ${MEDIUM}`, '      (6.50 KiB)']);
    expect(renderDroppedEntry({ key: KEY, qualname: LONGER, compBytes: 6656 })).toEqual([`  ${KEY}`, `      ${LONGER} (6.50 KiB)`]);
    const folded = renderDroppedEntry({ key: KEY, qualname: DOTTED, compBytes: 6656 });
    expect(overlong(folded.join('\n'))).toEqual([]);
    expect(folded[0]).toBe(`  ${KEY}`);
    for (const line of folded.slice(1)) expect(line).toMatch(/^ {6}\S/);
    // The pieces joined are the name, then the size.
    expect(folded.slice(1).map((line) => line.slice(6)).join('')).toBe(`${DOTTED} (6.50 KiB)`);
    expect(folded.length).toBe(3);
  });

  describe('the CLI', () => {
    let temp: TempDir;
    beforeAll(async () => {
      temp = await createTempDir('splitzip-gc-fold-');
    });
    afterAll(async () => temp?.cleanup());

    it('gc --drop-unbound-entries (dry run and real) within 120 columns, the name whole once unfolded; --json whole', async () => {
      // v1, then its fine-tune v2 (the long-named tensor changed) built with --rebind, then v1's binding
      // of that tensor removed by its key: v1's entry of it is bound to nothing. (A directory cache keeps
      // v1's binding beside v2's since 0.56, one binding per file; v1's file gone, it would go too.)
      const v1 = join(temp.path, 'v1');
      const v2 = join(temp.path, 'v2');
      const cache = join(temp.path, 'cache');
      await writeShardedTestModel(v1, [gaussianBf16('a.weight', [64, 64], 1), gaussianBf16(DOTTED, [64, 64], 2)], 2 * 8192);
      await writeShardedTestModel(v2, [gaussianBf16('a.weight', [64, 64], 1), gaussianBf16(DOTTED, [64, 64], 3)], 2 * 8192);
      let old: CacheEntry | undefined;
      for (const [model, extra] of [[v1, []], [v2, ['--rebind']]] as const) {
        const built = await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--quiet', ...extra]);
        expect(built.code, built.err).toBe(0);
        if (model !== v1) continue;
        const store = await openCacheStore(cache);
        old = [...store.entries()].find((e) => e.qualname === DOTTED)!;
        await store.close();
      }
      const [shardName, offsetBytes, sizeBytes] = old!.sliceKeys[0]!;
      const store = await openCacheStore(cache);
      try {
        await store.unbindSlices([{ shardName, offsetBytes, sizeBytes, key: old!.key }]);
      } finally {
        await store.close();
      }
      const json = await runInProcess(['gc', cache, '--drop-unbound-entries', '--dry-run', '--json']);
      expect(json.code, json.err).toBe(0);
      const { entries } = (JSON.parse(json.out) as GcCommandReport).unboundEntries!;
      expect(entries.map((e) => e.key)).toEqual([old!.key]);
      const [entry] = entries;
      expect(entry!.qualname).toBe(DOTTED);
      for (const dryRun of [['--dry-run'], []]) {
        const run = await runInProcess(['gc', cache, '--drop-unbound-entries', ...dryRun]);
        expect(run.code, run.err).toBe(0);
        expect(overlong(run.out)).toEqual([]);
        expect(unfoldEntry(run.out.split('\n'), entry!.key).replace(/\n/g, '')).toMatch(new RegExp(`^${entry!.key}${DOTTED.replace(/\./g, '\\.')} \\(\\d+(\\.\\d+)? KiB\\)$`));
      }
    });
  });
});
