// A binding's stamps are capped at MAX_SLICE_STAMPS, the files changed least recently first (past
// 16 files loaded in turn: slice-stamp-churn.test.ts), but never the last of a kind: object stamps
// pushing out every file stamp made the binding trusted for any local file.
import { describe, expect, it } from 'vitest';
import { MAX_SLICE_STAMPS } from '../src/index.js';
import { mergeSliceStamps } from '../src/merge-slice-stamps.js';

const objects = (from: number, count: number) => Array.from({ length: count }, (_, i) => `etag:"v${from + i}"`);

describe('mergeSliceStamps', () => {
  it('adds at the end, moves repeated stamps there, and keeps the MAX_SLICE_STAMPS files changed last (legacy stamps: mtime)', () => {
    expect(mergeSliceStamps(['1:1', '2:2'], ['1:1', '3:3'])).toEqual(['2:2', '1:1', '3:3']);
    const files = Array.from({ length: MAX_SLICE_STAMPS }, (_, i) => `${i}:${i}`);
    expect(mergeSliceStamps(files, ['99:99'])).toEqual([...files.slice(1), '99:99']);
  });

  it('never drops the last file stamp for object stamps, nor the last object stamp for file stamps', () => {
    let stamps: readonly string[] = ['100:7'];
    for (const stamp of objects(0, 40)) stamps = mergeSliceStamps(stamps, [stamp]);
    expect(stamps).toHaveLength(MAX_SLICE_STAMPS);
    expect(stamps[0]).toBe('100:7');
    expect(stamps.slice(1)).toEqual(objects(40 - (MAX_SLICE_STAMPS - 1), MAX_SLICE_STAMPS - 1));
    let files: readonly string[] = ['etag:"only"'];
    for (let i = 0; i < 40; i++) files = mergeSliceStamps(files, [`${i}:${i}`]);
    expect(files).toContain('etag:"only"');
    expect(files).toHaveLength(MAX_SLICE_STAMPS);
  });
});
