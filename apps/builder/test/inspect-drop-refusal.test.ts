// inspect --json says whether gc --drop-unbound-entries would be refused now (totals.dropRefusal:
// the store's dry run's error, { code, message }, or null): only the text said so before. The
// answer is the store's, for s3:// caches too (the text said "not on s3:// yet" whatever the store
// answered). Run in this process.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openCacheStore, StoreError, type CacheEntry, type CacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderInspectReport } from '../src/commands/inspect.js';
import { findDropRefusal } from '../src/find-drop-refusal.js';
import type { InspectReport } from '../src/inspect-cache.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-inspect-refusal-');
});
afterAll(async () => temp?.cleanup());

async function inspectJson(cache: string): Promise<InspectReport> {
  const result = await runInProcess(['inspect', cache, '--json']);
  expect(result.code, result.err).toBe(0);
  return JSON.parse(result.out) as InspectReport;
}

/** A cache of v1 and its fine-tune v2 built with --rebind: v1's b entry is bound to nothing. */
async function fineTunedCache(name: string): Promise<string> {
  const v1 = join(temp.path, `${name}-v1`);
  const v2 = join(temp.path, `${name}-v2`);
  const cache = join(temp.path, `${name}-cache`);
  let oldB: CacheEntry | undefined;
  await writeShardedTestModel(v1, [gaussianBf16('a.weight', [64, 64], 1401), gaussianBf16('b.weight', [64, 64], 1402)], 8192);
  await writeShardedTestModel(v2, [gaussianBf16('a.weight', [64, 64], 1401), gaussianBf16('b.weight', [64, 64], 1499)], 8192);
  for (const [model, extra] of [[v1, []], [v2, ['--rebind']]] as const) {
    const built = await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--quiet', ...extra]);
    expect(built.code, built.err).toBe(0);
    if (model !== v1) continue;
    const store = await openCacheStore(cache);
    oldB = [...store.entries()].find((entry) => entry.qualname === 'b.weight')!;
    await store.close();
  }
  // v1's b binding, which a directory cache keeps beside v2's since 0.56 (one binding per file), goes
  // (v1's file gone), leaving its entry unbound as --rebind did before; none where --rebind moved it.
  const [shardName, offsetBytes, sizeBytes] = oldB!.sliceKeys[0]!;
  const store = await openCacheStore(cache);
  try {
    await store.unbindSlices([{ shardName, offsetBytes, sizeBytes, key: oldB!.key }]);
  } finally {
    await store.close();
  }
  return cache;
}

describe('inspect --json totals.dropRefusal', () => {
  it('null where the drop would run; the store\'s MANIFEST_INVALID while a damaged manifest\'s kept copy is there; null again once it is gone', async () => {
    const cache = await fineTunedCache('kept');
    const clean = await inspectJson(cache);
    expect(clean.totals.unboundEntries).toBe(1);
    expect(clean.totals.dropRefusal).toBeNull();
    // No drop asks for --exclusive (a directory's takes the writer lock; s3://'s its intent objects).
    expect(clean.totals.dropNeedsExclusive).toBe(false);

    const kept = join(cache, 'manifest.json.damaged-1765000000000');
    await writeFile(kept, await readFile(join(cache, 'manifest.json')));
    const refused = await inspectJson(cache);
    expect(refused.totals.dropRefusal).toEqual({ code: 'MANIFEST_INVALID', details: expect.any(Object), message: expect.stringMatching(/dropUnboundEntries refuses while the cache holds a damaged manifest's kept copy \(manifest\.json\.damaged-1765000000000\)/) });
    // The text says the same, from the same answer.
    // The text quotes the same answer: why, and what to do.
    const text = (await runInProcess(['inspect', cache])).out;
    // At most 240 columns (it was ~600), wrapped to lines of 120: the gc that refuses, the code and
    // the reason as far as they fit; the whole message is --json's (above).
    const textLines = text.split('\n');
    const at = textLines.findIndex((line) => line.startsWith('unbound '));
    const wrapped = [textLines[at]!, ...textLines.slice(at + 1).filter((line, i, all) => all.slice(0, i + 1).every((l) => l.startsWith('    ')))];
    for (const line of wrapped) expect(line.length).toBeLessThanOrEqual(120);
    const unbound = wrapped.map((line, i) => (i === 0 ? line : line.slice(4))).join(' ');
    expect(unbound).toMatch(/^unbound 1 entry \([^)]+\): gc --drop-unbound-entries refuses now: MANIFEST_INVALID: while the cache holds a damaged manifest's kept copy .*\(inspect --json\)$/);
    expect(unbound.length).toBeLessThanOrEqual(240);
    // As gc itself answers.
    const gc = await runInProcess(['gc', cache, '--drop-unbound-entries', '--dry-run']);
    expect(gc.code).toBe(1);
    expect(gc.err).toContain(refused.totals.dropRefusal!.message);
  });

  it('a damaged journal: JOURNAL_INVALID, also with no entry unbound (the drop refuses all the same)', async () => {
    const cache = join(temp.path, 'journal-cache');
    const model = join(temp.path, 'journal-model');
    await writeShardedTestModel(model, [gaussianBf16('a.weight', [64, 64], 1411)], 8192);
    const built = await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--quiet']);
    expect(built.code, built.err).toBe(0);
    const journal = (await readdir(cache)).find((name) => /^journal\.\d+$/.test(name))!;
    const bytes = await readFile(join(cache, journal));
    bytes[3]! ^= 0x40; // the magic
    await writeFile(join(cache, journal), bytes);
    const report = await inspectJson(cache);
    expect(report.totals.unboundEntries).toBe(0);
    expect(report.totals.dropRefusal).toMatchObject({ code: 'JOURNAL_INVALID' });
  });

  it("is the store's answer, not the cache's kind: an s3:// store that drops is not said to refuse", async () => {
    const refusing = { dropUnboundEntries: () => Promise.reject(new StoreError('INVALID_ARGUMENT', 'dropUnboundEntries is not supported here', { path: 's3://b/c' })) } as unknown as CacheStore;
    expect(await findDropRefusal(refusing)).toEqual({ code: 'INVALID_ARGUMENT', details: {}, message: expect.stringContaining('dropUnboundEntries is not supported here') });
    const dropping = { dropUnboundEntries: () => Promise.resolve({ dryRun: true, count: 1, entries: [], reclaimedBytes: 0, blobsLeft: [] }) } as unknown as CacheStore;
    expect(await findDropRefusal(dropping)).toBeNull();
    // A bug is no refusal: thrown.
    const broken = { dropUnboundEntries: () => Promise.reject(new TypeError('boom')) } as unknown as CacheStore;
    await expect(findDropRefusal(broken)).rejects.toThrow('boom');

    const report = (dropRefusal: InspectReport['totals']['dropRefusal']): InspectReport => ({
      cache: 's3://b/c',
      entries: [],
      totals: { entries: 1, slices: 0, rawBytes: 8192, compBytes: 7000, ratio: 0.85, elementCount: 4096, escapeCount: 0, escapeRate: 0, unboundEntries: 1, unboundCompBytes: 7000, dropRefusal },
    });
    expect(renderInspectReport(report(null))).toContain('found by content key only; removed by\n  splitzip gc s3://b/c --drop-unbound-entries\n  build each model');
    expect(renderInspectReport(report({ code: 'INVALID_ARGUMENT', message: 'INVALID_ARGUMENT: not here' }))).toContain('\nunbound 1 entry (6.84 KiB): gc --drop-unbound-entries refuses now: INVALID_ARGUMENT: not here\n');
    // On s3:// the command line it names is the one that gives that refusal, with inspect's
    // --min-age, and no --exclusive (no drop needs it since 2026-12-07; no recent-writes refusal).
    const refusedS3 = report({ code: 'INVALID_ARGUMENT', message: 'INVALID_ARGUMENT: not here (file s3://b/c)' });
    refusedS3.totals.dropNeedsExclusive = true; // as a report of an older release said it: ignored
    expect(renderInspectReport(refusedS3, { minAgeMs: 35 * 60_000 })).toContain('\nunbound 1 entry (6.84 KiB): gc --drop-unbound-entries --min-age 35m refuses now: INVALID_ARGUMENT: not here (file\n    s3://b/c)\n');
    // A long one is cut at a word, and says where it is whole.
    const long = report({ code: 'MANIFEST_INVALID', message: `MANIFEST_INVALID: kept copies (${Array.from({ length: 200 }, (_, i) => `manifest.json.damaged-${i}`).join(', ')})` });
    const longLines = renderInspectReport(long).split('\n');
    const first = longLines.findIndex((l) => l.startsWith('unbound '));
    const longWrapped = [longLines[first]!];
    for (const l of longLines.slice(first + 1)) if (l.startsWith('    ')) longWrapped.push(l); else break;
    for (const l of longWrapped) expect(l.length).toBeLessThanOrEqual(120);
    const line = longWrapped.map((l) => l.trimStart()).join(' ');
    expect(line).toMatch(/refuses now: MANIFEST_INVALID: kept copies \(manifest\.json\.damaged-0,( manifest\.json\.damaged-\d+,)* … \(inspect --json\)$/);
    expect(line.length).toBeLessThanOrEqual(240);
    // A long cache path with spaces: the command is one line, never wrapped (pasted, a line break
    // in it ran something else); every other line within 120.
    const far = report(null);
    far.cache = `/home/user/projects/model caches/a rather long directory name for the cache/another level/and one more level/cache dir`;
    const farLines = renderInspectReport(far).split('\n');
    const from = farLines.findIndex((l) => l.startsWith('unbound '));
    const unboundLines = farLines.slice(from).filter((l) => l !== '');
    expect(unboundLines).toContain(`  splitzip gc '${far.cache}' --drop-unbound-entries`);
    for (const l of unboundLines) if (!l.startsWith('  splitzip gc ')) expect(l.length).toBeLessThanOrEqual(120);
    // s3://: the command to copy, with inspect's --min-age, never --exclusive (it named
    // `--exclusive` and "run it only while nothing else uses the cache" before 2026-12-07).
    const s3 = report(null);
    s3.totals.dropNeedsExclusive = true;
    const s3Text = renderInspectReport(s3, { minAgeMs: 2 * 3_600_000 });
    expect(s3Text).toContain('found by content key only; removed by\n  splitzip gc s3://b/c --drop-unbound-entries --min-age 2h\n  build each model');
    expect(s3Text).not.toMatch(/--exclusive|nothing else uses/);
  });

  it('passes inspect --min-age to the dry run it asks (as gc does)', async () => {
    const asked: Record<string, unknown>[] = [];
    const store = { dropUnboundEntries: (options: Record<string, unknown>) => (asked.push(options), Promise.resolve({ dryRun: true, count: 0, entries: [], reclaimedBytes: 0, blobsLeft: [] })) } as unknown as CacheStore;
    expect(await findDropRefusal(store, { minAgeMs: 35 * 60_000 })).toBeNull();
    expect(await findDropRefusal(store)).toBeNull();
    expect(asked).toEqual([{ dryRun: true, minAgeMs: 35 * 60_000 }, { dryRun: true }]);
  });

  it('inspect --min-age: s3:// only, 35m at least, usage errors (exit 2) before any request', async () => {
    const dir = await runInProcess(['inspect', join(temp.path, 'cache'), '--min-age', '1h']);
    expect(dir.code).toBe(2);
    expect(dir.err).toContain("option '--min-age' applies to s3:// caches only");
    // A bucket that does not exist: any request would fail otherwise (exit 1).
    const short = await runInProcess(['inspect', 's3://splitzip-no-such-bucket-recent/c', '--min-age', '10m']);
    expect(short.code).toBe(2);
    expect(short.err).toContain("option '--min-age' must be at least 35m on an s3:// cache");
  });
});
