import { parseFileStamp } from '@splitzip/safetensors';

/**
 * When a file stamp's file last changed: its ctime (ns, decimal digits without leading zeros), a
 * legacy stamp's (`<size>:<mtime ns>`, no ctime) mtime; '' for a stamp that is neither (an object
 * stamp, or one no release writes). One measure for both recency rules: which binding of a slice
 * goes past MAX_SLICE_BINDINGS (slice-bindings.ts) and which stamps of a binding go past
 * MAX_SLICE_STAMPS (merge-slice-stamps.ts).
 */
export function fileStampChangeTimeNs(stamp: string): string {
  const fields = parseFileStamp(stamp);
  return fields === undefined ? '' : (fields.ctimeNs ?? fields.mtimeNs).replace(/^0+(?=\d)/, '');
}

/** Compares decimal digit strings without leading zeros by value ('' below any): ns values exceed a JS number's exact range. */
export function compareDecimalDigits(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}
