import type { GcReport } from '@splitzip/store';
import { describe, expect, it } from 'vitest';
import { renderCollection } from '../src/commands/gc.js';

// Past ~125,000 items, lines.push(...items) throws RangeError (too many arguments): a gc that
// removed that many objects then failed at its report, after the removals.
const MANY = 200_000;

function names(prefix: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}/${i}`);
}

describe('gc report rendering of very long lists', () => {
  it('renders 200,000 alias objects, kept temp files and unknown files, each on a line', () => {
    const report: GcReport = {
      dryRun: false,
      durationMs: 1,
      orphanBlobs: [],
      orphanBytes: 0,
      tempFiles: [],
      keptTempFiles: names('blobs/.tmp', MANY),
      keptTempBytes: 0,
      oldJournals: [],
      staleLocks: [],
      unknownFiles: names('other', MANY),
      orphanAliases: names('slices/a', MANY),
    };
    const lines = renderCollection(report, true, 3_600_000);
    expect(lines.length).toBe(1 + 3 * (MANY + 1));
    expect(lines).toContain('  slices/a/199999');
    expect(lines).toContain('  blobs/.tmp/199999');
    expect(lines.at(-1)).toBe('  other/199999');
  });
});
