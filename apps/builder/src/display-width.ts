// Terminal columns of text: wide East Asian characters and emoji take two, combining marks and
// controls none. Counting UTF-16 code units instead wrapped the progress bar on CJK tensor names
// (stale lines left behind) and cut emoji in half.

/** Inclusive code point ranges that a terminal draws two columns wide (East Asian Wide/Fullwidth, emoji). */
const WIDE_RANGES: readonly (readonly [number, number])[] = [
  [0x1100, 0x115f],
  [0x231a, 0x231b],
  [0x2329, 0x232a],
  [0x23e9, 0x23ec],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xa960, 0xa97f],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe10, 0xfe19],
  [0xfe30, 0xfe6f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x1f004, 0x1f004],
  [0x1f0cf, 0x1f0cf],
  [0x1f18e, 0x1f18e],
  [0x1f191, 0x1f19a],
  [0x1f200, 0x1f251],
  [0x1f300, 0x1f64f],
  [0x1f680, 0x1f6ff],
  [0x1f7e0, 0x1f7eb],
  [0x1f900, 0x1f9ff],
  [0x1fa70, 0x1faff],
  [0x20000, 0x3fffd],
];

/** Columns one code point takes. */
export function codePointWidth(codePoint: number): number {
  if (codePoint < 0x20 || (codePoint >= 0x7f && codePoint < 0xa0)) return 0; // controls
  if ((codePoint >= 0x300 && codePoint <= 0x36f) || codePoint === 0x200d || (codePoint >= 0xfe00 && codePoint <= 0xfe0f)) return 0; // combining, ZWJ, variation selectors
  if (codePoint < 0x1100) return 1;
  for (const [first, last] of WIDE_RANGES) {
    if (codePoint < first) return 1;
    if (codePoint <= last) return 2;
  }
  return 1;
}

/** Columns `text` takes on a terminal. */
export function displayWidth(text: string): number {
  let width = 0;
  for (const char of text) width += codePointWidth(char.codePointAt(0)!);
  return width;
}

/** `text` cut to at most `columns` columns, by whole code points, ending in `…` where cut. */
export function cutToWidth(text: string, columns: number): string {
  if (displayWidth(text) <= columns) return text;
  if (columns <= 0) return '';
  let out = '';
  let width = 0;
  for (const char of text) {
    const w = codePointWidth(char.codePointAt(0)!);
    if (width + w > columns - 1) break;
    out += char;
    width += w;
  }
  return `${out}…`;
}

/** `text` padded with spaces to `columns` columns, on the right (or the left with `start`). */
export function padToWidth(text: string, columns: number, start = false): string {
  const pad = ' '.repeat(Math.max(0, columns - displayWidth(text)));
  return start ? pad + text : text + pad;
}
