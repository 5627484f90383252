// The text lines of load-default-model.mjs (the main job's last step) within a terminal's 120
// columns, as the builder's reports keep theirs: `what  result` rows whose result wraps under its
// column, a word wider than its room (a long path, a tensor name) folded after a `/` or `.` past half
// the room, else at the limit. Local to the script: the runtime does not depend on the builder, and
// this is no part of the runtime's API. Columns are counted in characters (code points).

/** The widest line the script prints: a terminal's 120 columns, as the builder's reports. */
export const REPORT_LINE_COLUMNS = 120;

/** The narrowest room a result wraps in: a key column wider than the line leaves this much, and results go below their key. */
const MIN_RESULT_COLUMNS = 40;

const widthOf = (text) => [...text].length;

/** Where a long word breaks: after a `.` (`model.layers.0.`) or a `/` (a path). */
const BREAK_AFTER = new Set(['.', '/']);

/**
 * `word` in pieces of at most `firstColumns` characters, then `columns` each: broken after the last
 * `.` or `/` that fits where that is past half the piece, else at the limit. The pieces joined are `word`.
 */
export function foldWord(word, firstColumns, columns) {
  const chars = [...word];
  const pieces = [];
  let room = Math.max(1, firstColumns);
  let start = 0;
  while (chars.length - start > room) {
    let cut = start + room;
    for (let at = cut; at > start + room / 2; at--) {
      if (BREAK_AFTER.has(chars[at - 1])) {
        cut = at;
        break;
      }
    }
    pieces.push(chars.slice(start, cut).join(''));
    start = cut;
    room = Math.max(1, columns);
  }
  pieces.push(chars.slice(start).join(''));
  return pieces;
}

/**
 * `text` in lines of at most `firstColumns` characters (the first) and `columns` (the others, which
 * the caller indents), broken at spaces; a word wider than a line folds (foldWord) from where it
 * starts, or from a line of its own where less than half a line is left. Nothing is cut: the lines
 * joined with single spaces (a fold's pieces without) are the text.
 */
export function wrapText(text, firstColumns, columns = firstColumns) {
  const lines = [];
  let line = '';
  const room = () => (lines.length === 0 ? firstColumns : columns);
  for (const word of text.split(' ')) {
    const width = widthOf(word);
    const lead = line === '' ? '' : `${line} `;
    if (widthOf(lead) + width <= room()) {
      line = `${lead}${word}`;
      continue;
    }
    if (width <= columns) {
      lines.push(line);
      line = word;
      continue;
    }
    // Wider than a line: folded, its first piece on this line where half of it is left.
    const left = room() - widthOf(lead);
    let pieces;
    if (lead !== '' && left >= room() / 2) {
      pieces = foldWord(word, left, columns);
      pieces[0] = `${lead}${pieces[0]}`;
    } else {
      if (lead !== '') lines.push(line);
      pieces = foldWord(word, room(), columns);
    }
    lines.push(...pieces.slice(0, -1));
    line = pieces.at(-1);
  }
  lines.push(line);
  return lines;
}

/**
 * Rows of `[what, result]` as lines of at most `columns` characters: the keys padded to the widest,
 * each result wrapped under its column (wrapText). Where the keys leave less than
 * MIN_RESULT_COLUMNS, each key stands on a line of its own and its result below it, 2 columns in.
 */
export function formatKeyValueLines(rows, columns = REPORT_LINE_COLUMNS) {
  const keyWidth = Math.max(0, ...rows.map(([key]) => widthOf(key)));
  const stacked = columns - keyWidth - 2 < MIN_RESULT_COLUMNS;
  const lines = [];
  for (const [key, value] of rows) {
    if (stacked) {
      for (const piece of wrapText(key, columns)) lines.push(piece);
      for (const piece of wrapText(value, columns - 2)) lines.push(`  ${piece}`.trimEnd());
      continue;
    }
    const hang = ' '.repeat(keyWidth + 2);
    wrapText(value, columns - hang.length).forEach((piece, index) => {
      lines.push(`${index === 0 ? `${key}${' '.repeat(keyWidth - widthOf(key))}  ` : hang}${piece}`.trimEnd());
    });
  }
  return lines;
}

/** A line of free text (a fallback's message, a mismatch) within `columns`, wrapped 2 columns in. */
export function formatNoteLines(text, columns = REPORT_LINE_COLUMNS) {
  return wrapText(text, columns, columns - 2).map((piece, index) => (index === 0 ? piece : `  ${piece}`));
}
