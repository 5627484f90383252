// A handle applies other writers' journal ops on refresh and counts their manifest growth (for the
// MAX_MANIFEST_BYTES check) only when it next writes, so readers skip the work. A reader that never
// writes kept every such op until the next reload: a runtime refreshing beside builds held up to a
// journal's worth of op objects. Above MAX_UNCOUNTED_JOURNAL_OPS (lowered here) they are counted at
// once, to the same total.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type * as Limits from '../src/limits.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

vi.mock('../src/limits.js', async (importOriginal) => ({ ...(await importOriginal<typeof Limits>()), MAX_UNCOUNTED_JOURNAL_OPS: 8 }));

const { openCacheStore } = await import('../src/index.js');

afterEach(removeTempDirs);

interface GrowthInternals {
  journalOpsUncounted: unknown[][];
  journalGrowthBytes: number;
  countJournalGrowth(): number;
}
const internals = (store: unknown): GrowthInternals => store as GrowthInternals;
const pendingOps = (store: unknown): number => internals(store).journalOpsUncounted.reduce((n, ops) => n + ops.length, 0);

describe('other writers journal ops a handle keeps uncounted', () => {
  it('stay bounded in a reader that refreshes, and count to the writer own total', async () => {
    const root = await makeTempDir();
    const writer = await openCacheStore(root, { create: true, chunkSize: 64, compactOnClose: false });
    const reader = await openCacheStore(root, { compactOnClose: false });
    try {
      for (let i = 0; i < 30; i++) {
        await writer.addEntry(toInput(makeTensor([64 + i], 100 + i), `t.${i}`, [[`shard-${i}.safetensors`, 0, 2 * (64 + i)]]));
        if (i % 3 === 0) await reader.refresh();
      }
      await reader.refresh();
      expect(reader.size).toBe(30);
      expect(pendingOps(reader)).toBeLessThanOrEqual(8);
      // Counted early or late, the estimate is the same: the writer counted each of its own records.
      expect(internals(reader).countJournalGrowth()).toBe(internals(writer).journalGrowthBytes);
      expect(internals(writer).journalGrowthBytes).toBeGreaterThan(0);
    } finally {
      await reader.close();
      await writer.close();
    }
  });
});
