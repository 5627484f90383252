// Human-readable numbers for the tables and the progress bar.
import { codePointWidth, displayWidth, padToWidth } from './display-width.js';
import { formatCoverage } from '@splitzip/codec/internal';

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  // Whole bytes print as they are; a fraction (a rate below 1 KiB/s) gets the other units' digits.
  if (unit === 0) return `${Number.isInteger(value) ? value : value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2)} B`;
  return `${value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2)} ${BYTE_UNITS[unit]}`;
}

export function formatRate(bytesPerSecond: number): string {
  if (!Number.isFinite(bytesPerSecond) || bytesPerSecond <= 0) return '-';
  return `${formatBytes(bytesPerSecond)}/s`;
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--:--';
  const total = Math.round(seconds);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const mm = String(m).padStart(2, '0');
  const ss = String(s).padStart(2, '0');
  return h > 0 ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
}

export function formatPercent(fraction: number | null | undefined, digits = 2): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return '-';
  return `${(fraction * 100).toFixed(digits)}%`;
}

/** A coverage as a percentage with `digits` decimals, rounded down (formatCoverage). */
export function formatCoveragePercent(fraction: number | null | undefined, digits = 2): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return '-';
  const text = formatCoverage(fraction, digits + 2);
  const sign = text.startsWith('-') ? '-' : '';
  const [whole = '0', decimals = ''] = text.replace('-', '').split('.');
  // Move the point two places: exact on the string, no float arithmetic (which could round up again).
  const percent = `${whole}${decimals.slice(0, 2)}`.replace(/^0+(?=\d)/, '');
  return `${sign}${percent}${digits > 0 ? `.${decimals.slice(2)}` : ''}%`;
}

/**
 * Widest a table column is padded to, in terminal columns. A longer cell (a tensor name of 4 KB, say)
 * is printed whole and only its own row goes out of line: padded to it, every row of a model with
 * one 200,000-character name took 200 KB (61 MB of table for 300 rows).
 */
export const MAX_TABLE_COLUMN_WIDTH = 160;

/** A plain-text table: left-aligned text columns, right-aligned number columns. */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  alignRight: readonly boolean[] = [],
  options: { maxLineColumns?: number } = {},
): string {
  const flat = formatFlatTable(header, rows, alignRight);
  const max = options.maxLineColumns;
  if (max === undefined || header.length < 2 || flat.split('\n').every((line) => displayWidth(line) <= max)) return flat;
  return formatStackedTable(header, rows, alignRight, max);
}

function formatFlatTable(header: readonly string[], rows: readonly (readonly string[])[], alignRight: readonly boolean[]): string {
  // Widths in terminal columns, so that rows with CJK or emoji tensor names line up.
  const widths = header.map((cell, column) =>
    Math.min(MAX_TABLE_COLUMN_WIDTH, rows.reduce((max, row) => Math.max(max, displayWidth(row[column] ?? '')), displayWidth(cell))),
  );
  const line = (row: readonly string[]): string =>
    row
      .map((cell, column) => padToWidth(cell, widths[column]!, alignRight[column]))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n');
}

/**
 * The table for a terminal where its rows would pass `maxLineColumns` (long tensor names, many
 * slices): each row's first cell (a tensor name) on a line of its own, folded where it is wider
 * (foldTensorName), the other cells as a table indented below it, the last of them wrapped at
 * spaces under itself. Nothing is cut.
 */
function formatStackedTable(header: readonly string[], rows: readonly (readonly string[])[], alignRight: readonly boolean[], maxLineColumns: number): string {
  const INDENT = '  ';
  const rest = (row: readonly string[]): string[] => row.slice(1);
  const restAlign = alignRight.slice(1);
  const restHeader = rest(header);
  const last = restHeader.length - 1;
  const widths = restHeader.map((cell, column) =>
    column === last ? 0 : Math.min(MAX_TABLE_COLUMN_WIDTH, rows.reduce((max, row) => Math.max(max, displayWidth(row[column + 1] ?? '')), displayWidth(cell))),
  );
  const lastStart = INDENT.length + widths.slice(0, last).reduce((sum, width) => sum + width + 2, 0);
  const lastRoom = Math.max(maxLineColumns - lastStart, 20);
  // A reduce, not Math.max(...rows): a spread of 125,000 rows or more threw a RangeError.
  const lastWidth = rows.reduce((max, row) => Math.max(max, Math.min(lastRoom, displayWidth(row[last + 1] ?? ''))), Math.min(lastRoom, displayWidth(restHeader[last]!)));
  const lines = (cells: readonly string[]): string[] => {
    const wrapped = wrapAtSpaces(cells[last] ?? '', lastRoom);
    // A last cell with a word wider than its column (one long slice) goes below the row, whole.
    const below = wrapped.some((line) => displayWidth(line) > lastRoom);
    const [first = '', ...more] = below ? [''] : wrapped;
    const head = cells.map((cell, column) => (column === last ? first : padToWidth(cell, widths[column]!, restAlign[column]))).join('  ');
    const under = below ? wrapAtSpaces(cells[last] ?? '', maxLineColumns - 2 * INDENT.length).map((line) => `${INDENT}${INDENT}${line}`) : more.map((line) => `${' '.repeat(lastStart)}${line}`);
    return [`${INDENT}${head}`.trimEnd(), ...under];
  };
  return [
    header[0]!,
    ...lines(restHeader),
    `${INDENT}${[...widths.slice(0, last), lastWidth].map((width) => '-'.repeat(width)).join('  ')}`,
    ...rows.flatMap((row) => [...foldFirstCell(row[0] ?? '', maxLineColumns), ...lines(rest(row))]),
  ].join('\n');
}

/** The widest line of the text reports (build, stats, verify): a terminal's 120 columns. */
export const REPORT_LINE_COLUMNS = 120;

/** `6,973,573`: a count with thousands separators, as every count of the text reports reads. */
export function formatCount(count: number): string {
  return Number.isFinite(count) ? count.toLocaleString('en-US', { maximumFractionDigits: 20 }) : String(count);
}

/** `1 problem`, `2 problems`, `1,024 entries`: a count and its noun, singular for one. */
export function formatCountOf(count: number, one: string, many = `${one}s`): string {
  return `${formatCount(count)} ${count === 1 ? one : many}`;
}

/**
 * Under a folded tensor name (a table's first cell, verify's list), its continuation lines: deeper
 * than the row's other cells (2 columns), so that they read as the name's, not as a row.
 */
export const NAME_HANG_INDENT = '    ';

/** A stacked table's first cell: whole where it fits, else folded under NAME_HANG_INDENT. */
function foldFirstCell(cell: string, maxLineColumns: number): string[] {
  if (displayWidth(cell) <= maxLineColumns) return [cell];
  const [first = '', ...more] = foldTensorName(cell, maxLineColumns, maxLineColumns - NAME_HANG_INDENT.length);
  return [first, ...more.map((piece) => `${NAME_HANG_INDENT}${piece}`)];
}

/** How `wrapAtSpaces` wraps (its defaults: plain text, table cells and help). */
export interface WrapOptions {
  /** Put before every line after the first. */
  hangIndent?: string;
  /** Keep a leading indent on the first line (split at spaces, it would be empty words). */
  keepLeadingIndent?: boolean;
  /** A size and its unit (`10.0 MiB`) and a quoted path in a `command` wrap as one word. */
  keepPhrasesWhole?: boolean;
  /** A word wider than a line stays on the line it starts where that holds no more than a label this wide (`FAIL`); else a line of its own. */
  labelColumns?: number;
  /** Tensor names: one wider than a line is folded (foldTensorName), with the punctuation around it, instead of printed whole. */
  tensorNames?: readonly string[];
}

/**
 * `text` in lines of at most `columns` columns, broken at spaces: the one wrapper of the text
 * output (wrapHanging is its report lines' preset). A word wider than a line stands alone, whole,
 * unless it is one of `tensorNames`: nothing is cut.
 */
export function wrapAtSpaces(text: string, columns: number, options: WrapOptions = {}): string[] {
  const { hangIndent = '', labelColumns = 0, tensorNames = [] } = options;
  const lead = options.keepLeadingIndent ? /^ */.exec(text)![0] : '';
  const split = text.slice(lead.length).split(' ');
  const words = options.keepPhrasesWhole ? keepUnitsWithNumbers(keepCommandsWhole(split)) : split;
  const lines: string[] = [];
  let line = lead;
  // Where the current line's words start (after its indent), in UTF-16 units.
  let start = lead.length;
  const hangWidth = displayWidth(hangIndent);
  const room = Math.max(columns - hangWidth, 20);
  for (const word of words) {
    const width = displayWidth(word);
    const used = displayWidth(line.slice(start));
    const followsLabel = labelColumns > 0 && used <= labelColumns && width > room;
    if (line.length > start && displayWidth(line) + 1 + width > columns && !followsLabel) {
      lines.push(line);
      line = `${hangIndent}${word}`;
      start = hangIndent.length;
    } else line = line.length === start ? `${line}${word}` : `${line} ${word}`;
    if (width > room && displayWidth(line) > columns && tensorNames.some((name) => isNameWord(word, name))) {
      // A long tensor name folds from where it starts, its pieces under the hanging indent.
      const before = line.slice(0, line.length - word.length);
      const pieces = foldTensorName(word, columns - displayWidth(before), Math.max(columns - hangWidth, 1));
      lines.push(`${before}${pieces[0]!}`, ...pieces.slice(1, -1).map((piece) => `${hangIndent}${piece}`));
      line = `${hangIndent}${pieces.at(-1)!}`;
      start = hangIndent.length;
    }
  }
  lines.push(line);
  return lines;
}

/** `word` is `name`, maybe in brackets or followed by `:` or `,` (`(e.g. <name>):`). */
function isNameWord(word: string, name: string): boolean {
  const at = name === '' ? -1 : word.indexOf(name);
  return at >= 0 && /^[([]*$/.test(word.slice(0, at)) && /^[)\]:,;]*$/.test(word.slice(at + name.length));
}

/** Where a long tensor name breaks: after a `.` (`model.layers.0.`) or a `/` (`Encoder/Layer_1/`). */
const NAME_BREAK_AFTER = new Set(['.', '/']);

/**
 * A tensor name in pieces of at most `firstColumns` columns, then `columns` each (the lines after
 * the first are indented by that much less): broken after the last `.` or `/` that fits where it
 * is past half the line, else at the limit (by whole code points). The pieces joined are `name`.
 */
export function foldTensorName(name: string, firstColumns: number, columns: number): string[] {
  const pieces: string[] = [];
  let pieceStart = 0;
  let room = Math.max(firstColumns, 1);
  let width = 0;
  // The end of the piece where it breaks at a separator (UTF-16 index), and the width after it.
  let breakAt = -1;
  let widthAfterBreak = 0;
  for (let at = 0; at < name.length; ) {
    const char = String.fromCodePoint(name.codePointAt(at)!);
    const charWidth = codePointWidth(char.codePointAt(0)!);
    if (width + charWidth > room && at > pieceStart) {
      const cut = breakAt > pieceStart && width - widthAfterBreak >= room / 2 ? breakAt : at;
      pieces.push(name.slice(pieceStart, cut));
      width = cut === at ? 0 : widthAfterBreak;
      widthAfterBreak = width;
      pieceStart = cut;
      breakAt = -1;
      room = Math.max(columns, 1);
      continue;
    }
    width += charWidth;
    at += char.length;
    if (NAME_BREAK_AFTER.has(char)) {
      breakAt = at;
      widthAfterBreak = 0;
    } else widthAfterBreak += charWidth;
  }
  pieces.push(name.slice(pieceStart));
  return pieces;
}

/** The widest label (`FAIL`, `note:`) a word wider than a line still follows on its line. */
const WRAP_LABEL_COLUMNS = 8;

/**
 * `text` as lines of at most `columns` columns, broken at spaces, every line after the first
 * indented by `hangIndent`, its leading indent kept. A word wider than a line (a long path) stays on
 * the line it starts, whole, where that is a short label's; else a line of its own: nothing is cut,
 * and `FAIL` is not left alone above what it is about. One of `tensorNames` folds instead.
 */
export function wrapHanging(text: string, hangIndent: string, columns = REPORT_LINE_COLUMNS, tensorNames: readonly string[] = []): string[] {
  return wrapAtSpaces(text, columns, { hangIndent, keepLeadingIndent: true, keepPhrasesWhole: true, labelColumns: WRAP_LABEL_COLUMNS, tensorNames });
}

/**
 * Report lines within REPORT_LINE_COLUMNS (gc's text, the --model bindings' lines of gc and
 * inspect): a longer line (the bindings' notes, up to ~500 columns; gc's kept-entries advice, ~300)
 * wraps at spaces, its rest 4 columns deeper than it starts (below a list's items at 2).
 */
export function fitReportLines(lines: readonly string[]): string[] {
  const fitted: string[] = [];
  for (const line of lines) {
    if (displayWidth(line) <= REPORT_LINE_COLUMNS) fitted.push(line);
    // One push per line: push(...lines) throws RangeError past ~125,000 arguments.
    else for (const piece of wrapHanging(line, `${/^ */.exec(line)![0]}${NAME_HANG_INDENT}`)) fitted.push(piece);
  }
  return fitted;
}

/** A byte unit (`MiB`, `KiB/s)`) after its number: the two wrap as one word (`10.0` ended a line, `MiB` began the next). */
const BYTE_UNIT_WORD = /^(B|KiB|MiB|GiB|TiB)(\/s)?[),;:]*$/;

function keepUnitsWithNumbers(words: readonly string[]): string[] {
  const joined: string[] = [];
  for (const word of words) {
    const previous = joined.at(-1);
    if (previous !== undefined && BYTE_UNIT_WORD.test(word) && /\d$/.test(previous)) joined[joined.length - 1] = `${previous} ${word}`;
    else joined.push(word);
  }
  return joined;
}

/**
 * A quoted path of a `command` in backticks (`'./my model'`) as one word: wrapped inside its
 * quotes, a copied command named another path (a newline and an indent in it). The command still
 * wraps between its words; quotes outside backticks (`the model's`) are prose.
 */
function keepCommandsWhole(words: readonly string[]): string[] {
  const joined: string[] = [];
  let inCommand = false;
  let inQuote = false;
  let continues = false;
  for (const word of words) {
    if (continues) joined[joined.length - 1] = `${joined.at(-1)!} ${word}`;
    else joined.push(word);
    for (let at = 0; at < word.length; at++) {
      const char = word[at];
      if (inQuote) inQuote = char !== "'";
      else if (char === '`') inCommand = !inCommand;
      else if (inCommand && char === '\\') at++;
      else if (inCommand && char === "'") inQuote = true;
    }
    continues = inQuote;
  }
  return joined;
}
