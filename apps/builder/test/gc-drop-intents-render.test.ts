// gc's text on s3:// names the blobs a drop's intent object keeps (keptUnderDrop) and the killed
// drops' intents it resolved (staleDropIntents), each line only when non-zero, "would" in a dry run.
import type { GcReport } from '@splitzip/store';
import { describe, expect, it } from 'vitest';
import { renderCollection } from '../src/commands/gc.js';

const base: GcReport = { dryRun: false, orphanBlobs: [], orphanBytes: 0, tempFiles: [], oldJournals: [], staleLocks: [], unknownFiles: [], orphanStamps: [], orphanAliases: [], durationMs: 1 };

describe("gc's lines for a drop's intent objects", () => {
  it('says what an intent kept and which stale intents were resolved; nothing when both are zero', () => {
    const lines = renderCollection({ ...base, keptUnderDrop: 2, staleDropIntents: ['dropping/a.json.0123456789ab'] }, true, 3_600_000);
    expect(lines).toContain('kept 2 orphan blobs a running or killed --drop-unbound-entries may put back: a later gc judges them');
    expect(lines).toContain('resolved 1 intent object of killed drops (entry put back if bound, else its blob removed)');
    const dry = renderCollection({ ...base, dryRun: true, keptUnderDrop: 1, staleDropIntents: ['x', 'y'] }, true, 3_600_000);
    expect(dry).toContain('would keep 1 orphan blob a running or killed --drop-unbound-entries may put back: a later gc judges them');
    expect(dry).toContain('would resolve 2 intent objects of killed drops (entry put back if bound, else its blob removed)');
    for (const line of [...lines, ...dry]) expect(line.length, line).toBeLessThanOrEqual(120);
    expect(renderCollection({ ...base, keptUnderDrop: 0, staleDropIntents: [] }, true, 3_600_000).join('\n')).not.toMatch(/intent|put back/);
  });
});
