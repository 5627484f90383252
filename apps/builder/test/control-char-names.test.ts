// Tensor names with tabs and control characters (any string a safetensors header holds): the text
// reports show them JSON-style escaped (`\t`, `\u001b`), their width counted as shown. A tab counted 0
// columns (`layer\t` x30 made build's and inspect's lines 192 columns once the terminal expanded
// them) and an ESC reached the terminal. --json has the names as they are.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderDroppedEntry } from '../src/commands/gc.js';
import { displayWidth } from '../src/display-width.js';
import { createProgressBar } from '../src/progress-bar.js';
import { showName } from '../src/show-name.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

const TABBED = `${'layer\t'.repeat(30)}weight`;
const ESCAPED = 'evil\u001b[31mred\u0007.weight';
// What a terminal would act on or draw at no width: none may be printed.
// eslint-disable-next-line no-control-regex -- what the test looks for
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/;

let temp: TempDir;
let model: string;
let cache: string;
beforeAll(async () => {
  temp = await createTempDir('splitzip-control-names-');
  model = await writeSingleFileModel(join(temp.path, 'model.safetensors'), [
    gaussianBf16(TABBED, [64, 64], 1),
    gaussianBf16(ESCAPED, [64, 64], 2),
    gaussianBf16('plain.weight', [64, 64], 3),
  ]);
  cache = join(temp.path, 'cache');
});
afterAll(async () => temp?.cleanup());

/** Checks a text report: no control character but line breaks, every line within 120 columns, the names escaped. */
function expectShownEscaped(text: string): void {
  expect(text).not.toMatch(CONTROL);
  expect(text.split('\n').filter((line) => displayWidth(line) > 120)).toEqual([]);
  // The folded name's pieces joined back (4 columns in and deeper): the escaped name.
  expect(text.replace(/\n {4,}/g, '')).toContain(showName(TABBED));
  expect(text).toContain('evil\\u001b[31mred\\u0007.weight');
}

describe('tensor names with control characters', () => {
  it('showName escapes them as JSON does, and is idempotent', () => {
    expect(showName('a\tb\nc\u001b\u0085\u202e')).toBe('a\\tb\\nc\\u001b\\u0085\\u202e');
    expect(showName(showName(ESCAPED))).toBe(showName(ESCAPED));
    expect(showName('model.layers.0.weight')).toBe('model.layers.0.weight');
  });

  it('build, inspect, stats and verify --model show them escaped within 120 columns; --json has them as they are', async () => {
    const built = await runInProcess(['build', model, '--out', cache, '--jobs', '0']);
    expect(built.code, built.err).toBe(0);
    expectShownEscaped(built.out);
    for (const argv of [['inspect', cache], ['stats', model]]) {
      const result = await runInProcess(argv);
      expect(result.code, result.err).toBe(0);
      expectShownEscaped(result.out);
    }
    const json = await runInProcess(['inspect', cache, '--json']);
    expect(json.code, json.err).toBe(0);
    const names = (JSON.parse(json.out) as { entries: { qualname: string }[] }).entries.map((entry) => entry.qualname);
    expect(names.sort()).toEqual([ESCAPED, TABBED, 'plain.weight'].sort());
    // The model's file rewritten in place with other values: verify --model names a tensor of it.
    await writeSingleFileModel(model, [gaussianBf16(TABBED, [64, 64], 4), gaussianBf16(ESCAPED, [64, 64], 5), gaussianBf16('plain.weight', [64, 64], 6)]);
    const verified = await runInProcess(['verify', cache, '--model', model]);
    expect(verified.code, verified.err).toBe(1);
    expect(verified.out).not.toMatch(CONTROL);
    expect(verified.out.split('\n').filter((line) => displayWidth(line) > 120)).toEqual([]);
    expect(verified.out).toMatch(/FAIL/);
    expect(verified.out.replace(/\n {4,}/g, '')).toContain(showName(TABBED));
  });

  it('an error line naming such a tensor shows it escaped on stderr; --json has it as it is', async () => {
    // A header whose tensor ends past the file's end: the safetensors error names the tensor.
    const header = Buffer.from(JSON.stringify({ [ESCAPED]: { dtype: 'BF16', shape: [64, 64], data_offsets: [0, 8192] } }));
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(header.length));
    const truncated = join(temp.path, 'truncated.safetensors');
    await writeFile(truncated, Buffer.concat([length, header, Buffer.alloc(16)]));
    const result = await runInProcess(['stats', truncated]);
    expect(result.code).toBe(1);
    expect(result.err).not.toMatch(CONTROL);
    expect(result.err).toContain('evil\\u001b[31mred\\u0007.weight');
    const json = await runInProcess(['stats', truncated, '--json']);
    expect(JSON.stringify(JSON.parse(json.out))).toContain(JSON.stringify(ESCAPED).slice(1, -1));
  });

  it("the progress bar's label and gc's dropped-entry line show them escaped", () => {
    const writes: string[] = [];
    const stream = Object.assign({ write: (chunk: string) => writes.push(chunk) > 0 }, { isTTY: true, columns: 200 }) as unknown as NodeJS.WritableStream & { isTTY: boolean; columns: number };
    const bar = createProgressBar({ stream, enabled: true, now: () => 0 });
    bar.update(10, 10, `1/3 ${ESCAPED}`);
    // The bar's own \r and erase-line escape aside.
    const drawn = writes.join('').replaceAll('\r', '').replaceAll('\u001b[K', '');
    expect(drawn).not.toMatch(CONTROL);
    expect(drawn).toContain(showName(ESCAPED));
    const lines = renderDroppedEntry({ key: 'a'.repeat(64), qualname: TABBED, compBytes: 1024 });
    expect(lines.join('\n')).not.toMatch(CONTROL);
    expect(lines.filter((line) => displayWidth(line) > 120)).toEqual([]);
  });
});
