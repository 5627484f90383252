import { mergeSliceStamps } from './merge-slice-stamps.js';

/**
 * Whether a binding holding `stamps` keeps `stamp` once it is recorded (mergeSliceStamps): false
 * where the binding holds MAX_SLICE_STAMPS stamps already and this one ranks last (a file changed
 * before the files whose stamps the binding keeps). aliasSlices answers such a record `true` (the
 * slice is bound to the key) but records nothing, so every new process checks that file again: a
 * caller says so instead of "recorded". Pure: the stamps as the caller sees them (an s3:// cache's
 * file stamps: this host's, host-file-stamps.ts; its object stamps follow the bucket's own rule).
 */
export function isSliceStampKept(stamps: readonly string[], stamp: string): boolean {
  return stamps.includes(stamp) || mergeSliceStamps(stamps, [stamp]).includes(stamp);
}
