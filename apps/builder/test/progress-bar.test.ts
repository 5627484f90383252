// The progress bar in isolation: a fake terminal stream and clock. Lines never exceed the
// terminal (wide CJK names and emoji counted as two columns, never split), the label's start (a
// counter) survives a cut, counts are not shown as bytes, and rate and ETA start with the bar.
import { describe, expect, it } from 'vitest';
import { cutToWidth, displayWidth, padToWidth } from '../src/display-width.js';
import { foldTensorName, formatTable, MAX_TABLE_COLUMN_WIDTH } from '../src/format-units.js';
import { createProgressBar } from '../src/progress-bar.js';

function fakeTerminal(columns: number) {
  const writes: string[] = [];
  const stream = Object.assign(
    {
      write(chunk: string) {
        writes.push(chunk);
        return true;
      },
    },
    { isTTY: true, columns },
  ) as unknown as NodeJS.WritableStream & { isTTY: boolean; columns: number };
  // The text of each drawn line, without the \r and the erase-line escape.
  const eraseLine = `${String.fromCharCode(27)}[K`;
  const lines = () => writes.map((w) => w.replace(/^\r/, '').replace(eraseLine, '')).filter((l) => l !== '');
  return { stream, lines };
}

describe('displayWidth / cutToWidth', () => {
  it('counts wide characters as two columns and cuts by whole code points', () => {
    expect(displayWidth('abc')).toBe(3);
    expect(displayWidth('層.权重')).toBe(7);
    expect(displayWidth('e\u0301')).toBe(1); // e + combining acute
    expect(displayWidth('🚀x')).toBe(3);
    expect(cutToWidth('层层层层', 5)).toBe('层层…');
    expect(cutToWidth('a🚀🚀', 4)).toBe('a🚀…');
    expect(cutToWidth('🚀🚀', 2)).toBe('…');
    expect(cutToWidth('short', 10)).toBe('short');
    expect(padToWidth('层', 4)).toBe('层  ');
    expect(padToWidth('1', 3, true)).toBe('  1');
  });

  it('lines up table rows of CJK names by columns', () => {
    const table = formatTable(['tensor', 'raw'], [['模型.层.0', '1 B'], ['model.x', '22 B']], [false, true]).split('\n');
    const ends = table.map((line) => displayWidth(line));
    expect(new Set(ends).size).toBe(1);
  });

  it('pads no column past MAX_TABLE_COLUMN_WIDTH: a very long name is printed whole on its own row only', () => {
    const long = 'n'.repeat(200_000);
    const rows = [[long, '1 B'], ...Array.from({ length: 300 }, (_, i) => [`t.${i}`, '2 B'])];
    const table = formatTable(['tensor', 'raw'], rows, [false, true]);
    expect(table).toContain(long);
    expect(table.length).toBeLessThan(long.length + 301 * (MAX_TABLE_COLUMN_WIDTH + 20));
    const short = table.split('\n').filter((line) => line.startsWith('t.'));
    expect(new Set(short.map((line) => displayWidth(line))).size).toBe(1);
  });
});

describe('formatTable with maxLineColumns', () => {
  // inspect's table of a model with long tensor names and verify --model's reasons ran to ~300 columns.
  const name = `module/Encoder/${'Layer_0/TransformerLayer/'.repeat(4)}dense/kernel`;
  // A first cell wider than the table folds (foldTensorName), its pieces 4 columns in.
  const folded = (columns: number): string[] => foldTensorName(name, columns, columns - 4).map((piece, index) => (index === 0 ? piece : `    ${piece}`));
  it('stays flat where it fits; else each first cell on its own line (folded where wider), the rest within the width, nothing cut', () => {
    const short = formatTable(['tensor', 'raw', 'slices'], [['a.weight', '8 B', 'm.safetensors@0+8']], [false, true, false], { maxLineColumns: 120 });
    expect(short).toBe(formatTable(['tensor', 'raw', 'slices'], [['a.weight', '8 B', 'm.safetensors@0+8']], [false, true, false]));
    const slices = Array.from({ length: 6 }, (_, i) => `model-0000${i}-of-00006.safetensors@${i * 1_000_000}+4096`).join(' ');
    const lines = formatTable(['tensor', 'raw', 'slices'], [[name, '8 KiB', slices], ['b', '1 B', 'one@0+1']], [false, true, false], { maxLineColumns: 120 }).split('\n');
    expect(lines.slice(0, 2)).toEqual(['tensor', '    raw  slices']);
    expect(lines.slice(3, 5)).toEqual([name.slice(0, -'dense/kernel'.length), '    dense/kernel']);
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(120);
    // Every slice is there, each whole.
    expect(lines.join(' ').split(/\s+/).filter((word) => word.includes('@'))).toEqual([...slices.split(' '), 'one@0+1']);
  });

  it('wraps a long last cell under itself, and puts one too wide for its column below the row', () => {
    const reason = `Top-16 coverage 0.949218 < 0.99; ${'would not shrink '.repeat(10).trim()}`;
    const lines = formatTable(['tensor', 'reason'], [[name, reason]], [], { maxLineColumns: 60 }).split('\n');
    expect(lines[0]).toBe('tensor');
    expect(lines.slice(3, 6)).toEqual(folded(60));
    expect(lines.slice(6).join(' ').replace(/\s+/g, ' ').trim()).toBe(reason);
    for (const line of lines.slice(4)) expect(line.length).toBeLessThanOrEqual(60);
    const wide = formatTable(['tensor', 'key', 'slice'], [[name, 'abcdef', 'x'.repeat(70)]], [], { maxLineColumns: 60 }).split('\n');
    expect(wide.slice(3)).toEqual([...folded(60), '  abcdef', `    ${'x'.repeat(70)}`]);
  });

  it('stacks a table of 200,000 rows (a cache of several large MoE models): no argument-count limit', () => {
    // The last column's width was Math.max(...rows): a RangeError (call stack) past ~125,000 rows.
    const rows = Array.from({ length: 200_000 }, (_, i) => [`t${i}`, '1 B', `s@${i}+1`]);
    rows[0] = [name, '1 B', 's@0+1'];
    const lines = formatTable(['tensor', 'raw', 'slices'], rows, [false, true, false], { maxLineColumns: 60 }).split('\n');
    expect(lines.slice(3, 7)).toEqual([...folded(60), '  1 B  s@0+1']);
    expect(lines.at(-2)).toBe('t199999');
  });
});

describe('createProgressBar', () => {
  it('never draws a line wider than the terminal; the label is cut, its counter kept', () => {
    for (const columns of [40, 60, 80, 100]) {
      const { stream, lines } = fakeTerminal(columns);
      let t = 0;
      const bar = createProgressBar({ stream, enabled: true, now: () => (t += 200) });
      bar.update(3 * 2 ** 20, 500 * 2 ** 20, `13/68 模型.层.${'权重'.repeat(20)}.🚀🚀`);
      bar.update(500 * 2 ** 20, 500 * 2 ** 20, '68/68 done');
      for (const line of lines()) {
        expect(displayWidth(line), line).toBeLessThanOrEqual(columns - 1);
        expect(line).not.toContain('\ufffd');
      }
      // Shown whole, or not at all: never a cut counter.
      expect(lines()[0]).not.toMatch(/ 13\/6?…/);
      if (columns >= 80) expect(lines()[0]).toMatch(/ETA .* 13\/68/);
    }
  });

  it('shows no rate or ETA before a second of progress (a first small tensor gave an ETA of hours)', () => {
    const { stream, lines } = fakeTerminal(120);
    let t = 0;
    const bar = createProgressBar({ stream, enabled: true, now: () => t });
    bar.update(0, 944 * 2 ** 20, 'start');
    t += 250;
    bar.update(4096, 944 * 2 ** 20, 'first');
    expect(lines().at(-1)).toMatch(/4\.00 KiB \/ 944 MiB {2}- {2}ETA --:-- {2}first$/);
    t += 750;
    bar.update(100 * 2 ** 20, 944 * 2 ** 20, 'later');
    expect(lines().at(-1)).toMatch(/100 MiB \/ 944 MiB {2}100 MiB\/s {2}ETA 00:08 {2}later$/);
  });

  it('counts items in count mode, and measures rate from its first update', () => {
    const { stream, lines } = fakeTerminal(120);
    let t = 10_000; // created long before its first update: that time must not count
    const bar = createProgressBar({ stream, enabled: true, unit: 'count', now: () => t });
    bar.update(0, 63, 'entries');
    t += 1000;
    bar.update(10, 63, 'entries');
    const last = lines().at(-1)!;
    expect(last).toMatch(/ 10 \/ 63 {2}10\.0\/s {2}ETA 00:05 {2}entries$/);
    expect(last).not.toMatch(/ B\b/);
  });

  it('writes a note above the bar and draws the bar again below it; without a bar, a plain line', () => {
    const { stream } = fakeTerminal(100);
    const writes: string[] = [];
    const write = stream.write.bind(stream);
    stream.write = ((chunk: string) => (writes.push(chunk), write(chunk))) as typeof stream.write;
    let t = 0;
    const bar = createProgressBar({ stream, enabled: true, now: () => t });
    bar.update(10, 100, '1/10 a');
    t = 5; // within the redraw interval: the note still redraws at once
    bar.note('splitzip build: waiting for the writer lock of c, held by pid 7');
    const eraseLine = `${String.fromCharCode(27)}[K`;
    expect(writes.slice(1, 3)).toEqual([`\r${eraseLine}`, 'splitzip build: waiting for the writer lock of c, held by pid 7\n']);
    expect(writes[3]!.startsWith('\r[')).toBe(true);
    expect(writes[3]!.endsWith(`1/10 a${eraseLine}`)).toBe(true);

    const plain = fakeTerminal(100);
    const off = createProgressBar({ stream: plain.stream, enabled: false });
    off.update(1, 2, 'x');
    off.note('a notice');
    expect(plain.lines()).toEqual(['a notice\n']);
  });
});
