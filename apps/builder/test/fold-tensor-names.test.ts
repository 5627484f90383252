// A tensor name wider than a report line (150-180 columns in real models) was printed whole, the one
// kind of text line past 120 columns in build, inspect, stats and verify. It folds now: after a `.`
// or `/` where one is past half the line, else at the limit, its pieces under a hanging indent;
// nothing is lost (the pieces joined give the name back), and --json keeps names whole.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayWidth } from '../src/display-width.js';
import { foldTensorName, formatTable, wrapHanging } from '../src/format-units.js';
import { renderVerifyReport } from '../src/commands/verify.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

const DOTTED = `model.language_model.layers.47.mlp.experts.127.${'gate_up_projection_block.'.repeat(4)}weight_scale_inv`; // 163 columns
const SLASHED = `module_apply_default/Encoder_en/KonaTransformer/Encode/${'TransformerStack/Layer_1/'.repeat(3)}FFN/conv2/Tensordot/Reshape_1`;
const PLAIN = 'w'.repeat(300);

/** The lines over `columns` columns. */
const overlong = (text: string, columns = 120): string[] => text.split('\n').filter((line) => displayWidth(line) > columns);

/** The name that starts a line of `lines` at `indent` and goes on in lines `hang` deeper: its pieces joined. */
function unfold(lines: readonly string[], first: string, indent: string, hang: string): string {
  const at = lines.findIndex((line) => line.startsWith(`${indent}${first}`));
  expect(at, first).toBeGreaterThanOrEqual(0);
  let name = lines[at]!.slice(indent.length);
  for (let next = at + 1; next < lines.length && lines[next]!.startsWith(`${indent}${hang}`) && lines[next]![indent.length + hang.length] !== ' '; next++) {
    name += lines[next]!.slice(indent.length + hang.length);
  }
  return name;
}

describe('foldTensorName', () => {
  it('breaks after the last `.` or `/` that fits, else at the limit; the pieces joined are the name', () => {
    const dotted = foldTensorName(DOTTED, 120, 116);
    expect(dotted.join('')).toBe(DOTTED);
    expect(dotted.length).toBe(2);
    expect(dotted[0]!.endsWith('.')).toBe(true);
    expect(dotted[0]!.length).toBeLessThanOrEqual(120);
    expect(dotted[0]!.length).toBeGreaterThan(60);
    const slashed = foldTensorName(SLASHED, 100, 96);
    expect(slashed.join('')).toBe(SLASHED);
    for (const piece of slashed.slice(0, -1)) expect(piece.endsWith('/'), piece).toBe(true);
    expect(foldTensorName(PLAIN, 120, 116)).toEqual(['w'.repeat(120), 'w'.repeat(116), 'w'.repeat(64)]);
    // A separator only near the start (under half the line) is no place to break: the limit is.
    expect(foldTensorName(`a.${'b'.repeat(200)}`, 100, 100)).toEqual([`a.${'b'.repeat(98)}`, 'b'.repeat(100), 'b'.repeat(2)]);
    expect(foldTensorName('short.name', 120, 116)).toEqual(['short.name']);
  });

  it('counts terminal columns and never splits a code point', () => {
    const name = `模型.${'层'.repeat(70)}.🚀${'x'.repeat(20)}`;
    const pieces = foldTensorName(name, 60, 60);
    expect(pieces.join('')).toBe(name);
    for (const piece of pieces) {
      expect(displayWidth(piece)).toBeLessThanOrEqual(60);
      expect(piece).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
    }
  });
});

describe('long tensor names in the text reports', () => {
  it("a stacked table's first cell folds under a 4-column indent, below the row's cells at 2", () => {
    const rows = [[DOTTED, 'BF16', '8 KiB', 'model-00001-of-00002.safetensors@0+8192'], [SLASHED, 'BF16', '1 B', 'one@0+1'], [PLAIN, 'BF16', '2 B', 'two@0+2']];
    const text = formatTable(['tensor', 'dtype', 'raw', 'slices'], rows, [false, false, true, false], { maxLineColumns: 120 });
    expect(overlong(text)).toEqual([]);
    const lines = text.split('\n');
    for (const name of [DOTTED, SLASHED, PLAIN]) expect(unfold(lines, name.slice(0, 40), '', '    ')).toBe(name);
    expect(lines).toContain('  BF16   8 KiB  model-00001-of-00002.safetensors@0+8192');
    expect(lines.slice(3, 6)).toEqual([`model.language_model.layers.47.mlp.experts.127.${'gate_up_projection_block.'.repeat(2)}`, `    ${'gate_up_projection_block.'.repeat(2)}weight_scale_inv`, '  BF16   8 KiB  model-00001-of-00002.safetensors@0+8192']);
  });

  it('wrapHanging folds a name it is told of, in brackets or not; another long word (a path) stays whole', () => {
    const fail = wrapHanging(`  FAIL ${DOTTED} (model-00001-of-00002.safetensors @ 0, 8 bytes): BLOB_MISSING: the blob file does not exist`, ' '.repeat(8), 120, [DOTTED]);
    expect(overlong(fail.join('\n'))).toEqual([]);
    expect(fail[0]!.startsWith('  FAIL model.language_model.')).toBe(true);
    expect(unfold(fail, 'FAIL ', '  ', '      ').replace(/^FAIL /, '').split(' ')[0]).toBe(DOTTED);
    const example = wrapHanging(`  FAIL 3 tensors of model-00001-of-00002.safetensors (e.g. ${SLASHED}): its slice is bound to nothing`, ' '.repeat(8), 120, [SLASHED]);
    expect(overlong(example.join('\n'))).toEqual([]);
    expect(example[0]).toBe('  FAIL 3 tensors of model-00001-of-00002.safetensors (e.g.');
    expect(example.slice(1).map((line) => line.slice(8)).join('')).toBe(`${SLASHED}): its slice is bound to nothing`);
    const path = `/${'d'.repeat(150)}/cache`;
    expect(wrapHanging(`cache ${path}: 3 entries checked`, '  ', 120, [DOTTED])).toEqual([`cache ${path}:`, '  3 entries checked']);
  });

  it('verify: a failed tensor and a not-cached one named within 120 columns, the reason below the name', () => {
    const store = { ok: true, checked: 1, passed: 1, decoded: 1, bytesRead: 0, generation: 0, durationMs: 1, problems: [] };
    const tensor = (name: string, status: 'failed' | 'not_cached', reason: string) => ({ name, dtype: 'BF16', shard: 'model-00001-of-00002.safetensors', offsetBytes: 0, sizeBytes: 2, key: null, status, reason });
    const text = renderVerifyReport({
      cache: '/c',
      ok: false,
      store,
      leftovers: null,
      model: {
        model: 'm',
        ok: false,
        coverageMin: 0.99,
        tensors: [tensor(DOTTED, 'failed', 'missing: no entry (run build)'), tensor(SLASHED, 'not_cached', 'Top-16 coverage 0.9 < 0.99')],
        totals: { tensors: 2, ok: 0, not_cached: 1, failed: 1, checked_bytes: 0 },
      },
    });
    expect(overlong(text)).toEqual([]);
    const lines = text.split('\n');
    expect(unfold(lines, SLASHED.slice(0, 40), '    ', '    ')).toBe(SLASHED);
    expect(lines[lines.findIndex((line) => line.startsWith(`    ${SLASHED.slice(0, 40)}`)) + 2]).toBe('      Top-16 coverage 0.9 < 0.99');
    expect(unfold(lines, 'FAIL ', '  ', '      ')).toMatch(`FAIL ${DOTTED} (model-00001-of-00002.safetensors @ 0, 2`);
  });
});

describe('build, inspect, verify --model and stats of a model with a long tensor name', () => {
  let temp: TempDir;
  let model: string;
  beforeAll(async () => {
    temp = await createTempDir('splitzip-fold-names-');
    model = await writeSingleFileModel(join(temp.path, 'long.safetensors'), [gaussianBf16(DOTTED, [64, 64], 3), gaussianBf16('w', [64, 64], 4)]);
  });
  afterAll(async () => temp?.cleanup());

  it('text within 120 columns, the name whole once its pieces are joined; --json names it whole', async () => {
    const cache = join(temp.path, 'cache');
    const built = await runInProcess(['build', model, '--out', cache, '--jobs', '0']);
    expect(built.code, built.err).toBe(0);
    expect(overlong(built.out)).toEqual([]);
    expect(unfold(built.out.split('\n'), 'model.language_model.', '', '    ')).toBe(DOTTED);
    for (const argv of [['inspect', cache], ['verify', cache, '--model', model, '--no-decode'], ['stats', model, '--quiet']]) {
      const run = await runInProcess(argv);
      expect(run.code, run.err).toBe(0);
      expect(overlong(run.out), argv[0]).toEqual([]);
      if (argv[0] !== 'verify') expect(run.out.replace(/\n {4}(?! )/g, ''), argv[0]).toContain(DOTTED);
    }
    const json = await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--json']);
    expect((JSON.parse(json.out) as { tensors: { name: string }[] }).tensors.map((t) => t.name)).toContain(DOTTED);
    const inspected = await runInProcess(['inspect', cache, '--json']);
    expect(inspected.out).toContain(`"${DOTTED}"`);
  });
});
