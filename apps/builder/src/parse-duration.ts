import { UNSIGNED_DECIMAL_SOURCE } from './decimal-number.js';
import { UsageError } from './errors.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** An unsigned decimal (the CLI's one number syntax) and an optional unit. */
const DURATION = new RegExp(`^(${UNSIGNED_DECIMAL_SOURCE})(ms|s|m|h|d)?$`);

/**
 * `90s`, `10m`, `1.5h`, `.5h`, `2d`, `250ms`, `1e3s`, or a bare number of seconds (`0` included)
 * → milliseconds. A typo must not turn into "delete everything now", so anything else (a sign
 * included) is a usage error.
 */
export function parseDurationMs(text: string, flag: string, commandName: string): number {
  const match = DURATION.exec(text.trim());
  if (!match) throw new UsageError(`option '${flag}' takes a duration like 45m, 90m, 1.5h or 2d (a number and ms, s, m, h or d; a bare number is seconds), got '${text}'`, commandName);
  const ms = Number(match[1]) * UNIT_MS[match[2] ?? 's']!;
  if (!Number.isFinite(ms) || ms > Number.MAX_SAFE_INTEGER) throw new UsageError(`option '${flag}' is too large: '${text}'`, commandName);
  return Math.round(ms);
}
