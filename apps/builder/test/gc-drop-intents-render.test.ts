// gc's text on s3:// names the blobs a drop's intent object keeps (keptUnderDrop) and the killed
// drops' intents it resolved (staleDropIntents), each line only when non-zero, "would" in a dry run;
// what resolving them did (staleDropResolution), a drop that stopped early, a drop's blobsMissing.
import type { GcReport } from '@splitzip/store';
import { describe, expect, it } from 'vitest';
import { renderBlobsMissing, renderCollection, renderDropStopped, renderRestoreConflicts, renderStaleDropResolution } from '../src/commands/gc.js';

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

describe("gc's lines for what resolving killed drops' intents did, and for a drop that stopped early", () => {
  const entry = `entries/${'a'.repeat(32)}.${'b'.repeat(64)}.json`;
  const blob = `blobs/${'a'.repeat(32)}.${'b'.repeat(64)}.bin`;
  const intent = `dropping/${'c'.repeat(32)}.${'d'.repeat(64)}.json.0123456789ab`;

  it("renders staleDropResolution, each line only when not empty, names within 120 columns, the cache quoted in the build to copy", () => {
    const lines = renderStaleDropResolution(
      { restored: [entry], blobsDeleted: [blob], blobsMissing: [entry], intentsInvalid: [intent], restoreConflicts: [entry], entriesLost: [entry], error: { code: 'S3_UNAVAILABLE', message: 'gone\u001b[2J' } },
      's3://b/my cache',
    );
    expect(lines).toContain('put back 1 entry of killed drops (bound since the drop judged them):');
    expect(lines).toContain("removed 1 blob of killed drops' unbound entries:");
    expect(lines).toContain('found 1 bound entry of killed drops without a blob: not put back, their tensors load raw until a build');
    expect(lines).toContain("  `splitzip build <model> --out 's3://b/my cache'` with each model that uses the cache stores them again");
    expect(lines).toContain('resolved 1 damaged intent object (no drop intent, or no valid entry in it) by name: never put back');
    expect(lines).toContain('could not put back 1 bound entry of killed drops (refused each time): their intents stay for the next gc or drop');
    expect(lines).toContain('lost 1 bound entry of damaged intents (nothing valid to put back): their tensors load raw until a build');
    expect(lines.join('\n')).toContain("resolving killed drops' intents failed (those intents stay for the next gc or drop): S3_UNAVAILABLE: gone\\u001b[2J");
    // A name wider than the line folds: its pieces joined are the name.
    const at = lines.indexOf('resolved 1 damaged intent object (no drop intent, or no valid entry in it) by name: never put back');
    expect(lines[at + 1]!.trim() + lines[at + 2]!.trim()).toBe(intent);
    for (const line of lines.slice(0, -1)) expect(line.length, line).toBeLessThanOrEqual(120);
    expect(renderStaleDropResolution({ restored: [], blobsDeleted: [], blobsMissing: [] }, 'c')).toEqual([]);
    expect(renderStaleDropResolution(undefined, 'c')).toEqual([]);
    // gc's collection carries them (after its resolved-intents line).
    expect(renderCollection({ ...base, staleDropIntents: [intent], staleDropResolution: { restored: [entry], blobsDeleted: [], blobsMissing: [] } }, true, 3_600_000, 'c')).toContain(
      'put back 1 entry of killed drops (bound since the drop judged them):',
    );
  });

  it("renders a drop's restoreConflicts: not put back, their intents kept; nothing when empty", () => {
    const lines = renderRestoreConflicts([entry]);
    expect(lines[0]).toBe('could not put back 1 entry a writer bound meanwhile (refused each time): a later gc or drop puts them back');
    expect(lines.slice(1).map((line) => line.trim()).join('')).toBe(entry);
    expect(lines[0]!.length).toBeLessThanOrEqual(120);
    expect(renderRestoreConflicts([])).toEqual([]);
  });

  it('renders a drop that stopped early: why, and the deleted entries left to the resolver; nothing when it did not stop', () => {
    const lines = renderDropStopped({ reason: 'intent-old', leftToResolver: [entry] });
    expect(lines[0]).toBe("stopped early: its intent object was 3h old (the drop paused, or this machine's clock behind); the other unbound entries stay for a later --drop-unbound-entries");
    expect(lines[1]).toBe('left 1 deleted entry to a later gc or drop, which removes their blobs (or puts back one bound by then) once their intents are 6h old:');
    expect(lines.slice(2).map((line) => line.trim()).join('')).toBe(entry);
    expect(renderDropStopped({ reason: 'intent-gone', leftToResolver: [] })).toEqual([
      "stopped early: its intent object was gone (a gc or drop took it for a killed drop's); the other unbound entries stay for a later --drop-unbound-entries",
    ]);
    expect(renderDropStopped({ reason: 'paused', leftToResolver: [] })[0]).toContain('it ran 3h into one batch');
    expect(renderDropStopped(undefined)).toEqual([]);
  });

  it("renders a drop's blobsMissing as entries not put back (read raw until a build), not as loads that fail", () => {
    const lines = renderBlobsMissing([blob], '/tmp/my cache');
    expect(lines[0]).toBe('found 1 blob missing under entries a writer bound meanwhile: not put back, their tensors load raw until a build');
    expect(lines[1]).toBe("  `splitzip build <model> --out '/tmp/my cache'` with each model that uses the cache stores them again");
    expect(lines.join('\n')).not.toMatch(/fail|--repair/);
  });
});
