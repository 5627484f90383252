import { cutToWidth, displayWidth } from './display-width.js';
import { formatBytes, formatDuration, formatRate } from './format-units.js';
import { showName } from './show-name.js';

export interface ProgressBar {
  /** Done out of total (bytes, or items with `unit: 'count'`); `label` follows the numbers (e.g. `3/68 tensor name`). */
  update(done: number, total: number, label?: string): void;
  /** Erases the bar so that what follows starts on a clean line. */
  finish(): void;
  /**
   * Writes `line` (one line, no newline) on the stream: above the bar, which is drawn again below
   * it, where there is one; as a plain line where there is none (a pipe, `--quiet`): a notice such
   * as a wait for another writer's lock, where silence would look like a hang.
   */
  note(line: string): void;
}

export interface ProgressBarOptions {
  stream: NodeJS.WritableStream & { isTTY?: boolean | undefined; columns?: number | undefined };
  /** False draws nothing at all (not a TTY, `--quiet`, `--json` to a pipe, ...). */
  enabled: boolean;
  /** Redraws at most this often; a final update always draws. */
  intervalMs?: number | undefined;
  /** What the numbers count: bytes (default: `1.2 GiB / 2.9 GiB  410 MiB/s`) or items (`12 / 63  8.3/s`). */
  unit?: 'bytes' | 'count' | undefined;
  now?: (() => number) | undefined;
}

/** No bar: notes are plain lines. */
function noBar(stream: ProgressBarOptions['stream']): ProgressBar {
  return { update() {}, finish() {}, note: (line) => void stream.write(`${line}\n`) };
}
const BAR_CELLS = 24;
/** How long progress is measured before a rate (and an ETA) is shown. */
const RATE_WINDOW_MS = 1000;

/**
 * A one-line progress bar on a TTY: `[#####.....]  42%  1.2 GiB / 2.9 GiB  410 MiB/s  ETA 00:04  label`.
 * Rate is measured from the first update (steady, not jumpy), and shown (with the ETA from it)
 * once RATE_WINDOW_MS have passed: a first small tensor alone, just after start-up, gave an ETA of hours. A line wider than
 * the terminal cuts the label from its end (its start, a counter, stays longest), then drops rate
 * and ETA: a line that wrapped left stale lines behind.
 */
export function createProgressBar(options: ProgressBarOptions): ProgressBar {
  const { stream } = options;
  if (!options.enabled) return noBar(stream);
  const now = options.now ?? (() => performance.now());
  const intervalMs = options.intervalMs ?? 100;
  const counts = options.unit === 'count';
  const amount = (n: number) => (counts ? String(n) : formatBytes(n));
  const perSecond = (rate: number) => (counts ? (Number.isFinite(rate) && rate > 0 ? `${rate.toFixed(rate >= 100 ? 0 : 1)}/s` : '-') : formatRate(rate));
  let startMs: number | undefined;
  let lastDrawMs = -Infinity;
  let drawn = false;
  let last: [done: number, total: number, label: string] | undefined;

  const bar: ProgressBar = {
    update(done, total, rawLabel = '') {
      // A tensor name with a tab or an ESC: shown escaped, so that its width is right and no ESC reaches the terminal.
      const label = showName(rawLabel);
      last = [done, total, label];
      const t = now();
      startMs ??= t;
      if (t - lastDrawMs < intervalMs && done < total) return;
      lastDrawMs = t;
      const fraction = total > 0 ? Math.min(1, done / total) : 1;
      const filled = Math.round(fraction * BAR_CELLS);
      const elapsedS = (t - startMs) / 1000;
      const rate = elapsedS * 1000 >= RATE_WINDOW_MS ? done / elapsedS : 0;
      const etaS = rate > 0 ? (total - done) / rate : Number.NaN;
      const head = `[${'#'.repeat(filled)}${'.'.repeat(BAR_CELLS - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}%  ${amount(done)} / ${amount(total)}`;
      const timing = `  ${perSecond(rate)}  ETA ${formatDuration(etaS)}`;
      // A fresh pty (e.g. under `script`) may report 0 columns: fall back to 80. One column is left
      // free: writing the last one makes some terminals wrap.
      const columns = (stream.columns || 80) - 1;
      const fit = (base: string): string | undefined => {
        const room = columns - displayWidth(base);
        if (room < 0) return undefined;
        // A cut that reaches into the label's first word (a counter: `13/68`) would misread (`13/6`).
        const firstWord = label.split(' ', 1)[0]!;
        if (label === '' || room - 2 < displayWidth(firstWord) + 1) return base;
        return `${base}  ${cutToWidth(label, room - 2)}`;
      };
      const line = fit(head + timing) ?? fit(head) ?? cutToWidth(head, columns);
      // \r returns to column 0, ESC[K erases the rest of the previous, possibly longer, line.
      stream.write(`\r${line}\x1b[K`);
      drawn = true;
    },
    finish() {
      if (drawn) stream.write('\r\x1b[K');
      drawn = false;
    },
    note(line) {
      const redraw = drawn && last !== undefined;
      bar.finish();
      stream.write(`${line}\n`);
      if (redraw) {
        lastDrawMs = -Infinity;
        bar.update(...last!);
      }
    },
  };
  return bar;
}
