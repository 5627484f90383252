import { formatBytes, formatDuration, formatRate } from './format-units.js';

export interface ProgressBar {
  /** Bytes done out of total; `label` is shown after the numbers (e.g. the tensor name). */
  update(doneBytes: number, totalBytes: number, label?: string): void;
  /** Erases the bar so that what follows starts on a clean line. */
  finish(): void;
}

export interface ProgressBarOptions {
  stream: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  /** False draws nothing at all (not a TTY, `--quiet`, `--json` to a pipe, ...). */
  enabled: boolean;
  /** Redraws at most this often; a final update always draws. */
  intervalMs?: number;
  now?: () => number;
}

const NO_PROGRESS: ProgressBar = { update() {}, finish() {} };
const BAR_CELLS = 24;

/**
 * A one-line progress bar on a TTY: `[#####.....]  42%  1.2 GiB / 2.9 GiB  410 MiB/s  ETA 00:04  name`.
 * Rate is measured over the whole run so far (steady, not jumpy); ETA from that rate.
 */
export function createProgressBar(options: ProgressBarOptions): ProgressBar {
  if (!options.enabled) return NO_PROGRESS;
  const { stream } = options;
  const now = options.now ?? (() => performance.now());
  const intervalMs = options.intervalMs ?? 100;
  const startMs = now();
  let lastDrawMs = -Infinity;
  let drawn = false;

  return {
    update(doneBytes, totalBytes, label = '') {
      const t = now();
      if (t - lastDrawMs < intervalMs && doneBytes < totalBytes) return;
      lastDrawMs = t;
      const fraction = totalBytes > 0 ? Math.min(1, doneBytes / totalBytes) : 1;
      const filled = Math.round(fraction * BAR_CELLS);
      const elapsedS = (t - startMs) / 1000;
      const rate = elapsedS > 0 ? doneBytes / elapsedS : 0;
      const etaS = rate > 0 ? (totalBytes - doneBytes) / rate : Number.NaN;
      let line =
        `[${'#'.repeat(filled)}${'.'.repeat(BAR_CELLS - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}%  ` +
        `${formatBytes(doneBytes)} / ${formatBytes(totalBytes)}  ${formatRate(rate)}  ETA ${formatDuration(etaS)}`;
      if (label) line += `  ${label}`;
      // A fresh pty (e.g. under `script`) may report 0 columns: fall back to 80.
      const columns = stream.columns || 80;
      if (line.length > columns - 1) line = line.slice(0, Math.max(0, columns - 1));
      // \r returns to column 0, ESC[K erases the rest of the previous, possibly longer, line.
      stream.write(`\r${line}\x1b[K`);
      drawn = true;
    },
    finish() {
      if (drawn) stream.write('\r\x1b[K');
      drawn = false;
    },
  };
}
