// Tensor names and shard file names come from the model's and the cache's files: any string. A
// tab or control character in one counted 0 columns (`layer\t` x30 made a 192-column line once the
// terminal expanded the tabs), and an ESC reached the terminal as an escape sequence.

/** Characters a text report shows escaped: C0 and C1 controls, DEL, line/paragraph separators, bidi controls. */
// eslint-disable-next-line no-control-regex -- matching control characters is what it is for
const SHOWN_ESCAPED = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** JSON's short escapes; any other is `\u` and 4 hex digits, as JSON writes them. */
const SHORT_ESCAPES: Readonly<Record<string, string>> = { '\b': '\\b', '\t': '\\t', '\n': '\\n', '\f': '\\f', '\r': '\\r' };

/**
 * `name` as a text report shows it: each control character JSON-style escaped (`\t`, `\u001b`), so
 * that its width is the columns it takes and nothing reaches the terminal as a command. A
 * backslash stays as it is, so that this is idempotent (a name escaped twice reads the same); the
 * name itself is in `--json`. Plain names are returned unchanged.
 */
export function showName(name: string): string {
  return name.replace(SHOWN_ESCAPED, (char) => SHORT_ESCAPES[char] ?? `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `text` (several lines) with each line's control characters escaped as showName does, the line breaks kept. */
export function showLines(text: string): string {
  return text.split('\n').map(showName).join('\n');
}
