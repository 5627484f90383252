// gc --drop-unbound-entries: the entries no slice is bound to go, with their blobs (a fine-tune's
// build --rebind leaves the old revision's tensor unbound), before the --model prune of the same run
// (the entries it leaves unbound stay until the next run: a build binds them again); text and --json reports; a
// second run removes none; refused (exit 1, nothing removed) while a damaged manifest's kept copy
// says build --repair salvaged the cache without its bindings. On s3:// (the gateway): no --exclusive
// needed and no refusal of a cache written to lately (since 2026-12-07; --exclusive accepted, no
// effect), only entries older than --min-age go, which the command hands the store; --exclusive on
// a directory is a usage error. Run in this process.
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openCacheStore, StoreError } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GcCommandReport } from '../src/commands/gc.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { memoryIo, runInProcess } from './helpers/run-in-process.js';
import { runCli } from '../src/run-cli.js';
import { describeS3, dropBucket, listObjects, rawClient, uniqueBucket } from './helpers/s3.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-gc-drop-');
});
afterAll(async () => temp?.cleanup());

const a = gaussianBf16('a.weight', [64, 64], 1101);
const b = gaussianBf16('b.weight', [64, 64], 1102);
const b2 = gaussianBf16('b.weight', [64, 64], 1199); // the fine-tune's b
const c = gaussianBf16('c.weight', [32, 64], 1103);

async function build(model: string, cache: string, ...extra: string[]): Promise<void> {
  const result = await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--quiet', ...extra]);
  expect(result.code, result.err).toBe(0);
}

async function gcJson(...args: string[]): Promise<GcCommandReport> {
  const result = await runInProcess(['gc', ...args, '--json']);
  expect(result.code, result.err).toBe(0);
  return JSON.parse(result.out) as GcCommandReport;
}

async function qualnames(cache: string): Promise<string[]> {
  const store = await openCacheStore(cache);
  try {
    return [...store.entries()].map((e) => `${e.qualname}:${e.sliceKeys.length}`).sort();
  } finally {
    await store.close();
  }
}

/**
 * A cache of model v1 (a b c), then its fine-tune v2 (b changed, same files) built with --rebind:
 * v1's b entry is bound to nothing. A directory cache keeps v1's b binding beside v2's since 0.56
 * (one binding per file): it is removed here (v1's file gone, its binding dropped past
 * MAX_SLICE_BINDINGS or by a gc --model), as an s3:// cache's --rebind moved it.
 * `cacheUrl`: an s3:// cache instead of a directory.
 */
async function fineTunedCache(name: string, cacheUrl?: string): Promise<{ cache: string; v1: string; v2: string; oldB: string }> {
  const v1 = join(temp.path, `${name}-v1`);
  const v2 = join(temp.path, `${name}-v2`);
  const cache = cacheUrl ?? join(temp.path, `${name}-cache`);
  await writeShardedTestModel(v1, [a, b, c], 2 * 8192);
  await writeShardedTestModel(v2, [a, b2, c], 2 * 8192);
  await build(v1, cache);
  const store = await openCacheStore(cache);
  const oldEntry = [...store.entries()].find((e) => e.qualname === 'b.weight')!;
  const oldB = oldEntry.key;
  await store.close();
  await build(v2, cache, '--rebind');
  const [shardName, offsetBytes, sizeBytes] = oldEntry.sliceKeys[0]!;
  const writer = await openCacheStore(cache);
  try {
    // Only that binding (its key): none where --rebind moved it (s3://, or a build before 0.56).
    await writer.unbindSlices([{ shardName, offsetBytes, sizeBytes, key: oldB }]);
  } finally {
    await writer.close();
  }
  expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:0', 'b.weight:1', 'c.weight:1']);
  return { cache, v1, v2, oldB };
}

describe('gc --drop-unbound-entries', () => {
  it('removes the old revision\'s unbound entry and its blob, keeps the bound ones; text report; a dry run first changes nothing; a rerun removes none', async () => {
    const { cache, oldB } = await fineTunedCache('text');
    // inspect counts them, and names the command.
    const inspected = await runInProcess(['inspect', cache]);
    expect(inspected.out).toMatch(new RegExp(`^unbound 1 entry bound to no slice \\(\\d+(\\.\\d+)? KiB\\): found by content key only; removed by\\n {2}splitzip gc ${cache} --drop-unbound-entries\\n {2}build each model that uses the cache first: one whose shards were renamed binds its tensors among them again$`, 'm'));
    const inspectedJson = JSON.parse((await runInProcess(['inspect', cache, '--json'])).out) as { totals: { unboundEntries: number; unboundCompBytes: number } };
    expect(inspectedJson.totals.unboundEntries).toBe(1);
    expect(inspectedJson.totals.unboundCompBytes).toBe((await gcJson(cache, '--drop-unbound-entries', '--dry-run')).unboundEntries!.reclaimedBytes);
    const dry = await runInProcess(['gc', cache, '--drop-unbound-entries', '--dry-run']);
    expect(dry.code, dry.err).toBe(0);
    expect(dry.out).toMatch(/^would remove 1 unbound entry \(\d+(\.\d+)? KiB\)$/m);
    expect(dry.out).toContain(`  ${oldB} b.weight (`);
    // A dry run that listed anything ends saying how to remove it.
    expect(dry.out).toMatch(/\nrun without --dry-run to remove them\n$/);
    expect(existsSync(join(cache, 'blobs', `${oldB}.bin`))).toBe(true);
    expect(await qualnames(cache)).toHaveLength(4);

    const real = await runInProcess(['gc', cache, '--drop-unbound-entries']);
    expect(real.code, real.err).toBe(0);
    expect(real.out).toMatch(/^removed 0 orphan blobs/m);
    expect(real.out).toMatch(/^removed 1 unbound entry \(\d+(\.\d+)? KiB\)$/m);
    expect(existsSync(join(cache, 'blobs', `${oldB}.bin`))).toBe(false);
    expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:1', 'c.weight:1']);
    expect((await readdir(join(cache, 'blobs'))).length).toBe(3);

    expect((await runInProcess(['inspect', cache])).out).not.toMatch(/^unbound /m);
    const again = await runInProcess(['gc', cache, '--drop-unbound-entries']);
    expect(again.out).toMatch(/^removed 0 unbound entries \(0 B\)$/m);
    const verify = await runInProcess(['verify', cache, '--json']);
    expect(verify.code, verify.err).toBe(0);
  });

  it('--exclusive on a directory cache is a usage error (its drop takes the writer lock), exit 2, nothing removed', async () => {
    const { cache } = await fineTunedCache('exclusive-dir');
    const result = await runInProcess(['gc', cache, '--drop-unbound-entries', '--exclusive']);
    expect(result.code, result.err).toBe(2);
    expect(result.err).toContain("option '--exclusive' applies to s3:// caches only: a directory cache's drop takes its writer lock");
    expect(await qualnames(cache)).toHaveLength(4);
  });

  it('--json: unboundEntries with the entries, their bytes and no blob left; absent without the option', async () => {
    const { cache, oldB } = await fineTunedCache('json');
    const plain = await gcJson(cache);
    expect(plain.unboundEntries).toBeUndefined();
    const report = await gcJson(cache, '--drop-unbound-entries');
    expect(report.unboundEntries).toEqual({
      dryRun: false,
      count: 1,
      entries: [{ key: oldB, qualname: 'b.weight', compBytes: expect.any(Number) }],
      reclaimedBytes: report.unboundEntries!.entries[0]!.compBytes,
      blobsLeft: [],
    });
    expect(report.orphanBlobs).toEqual([]);
  });

  it('before the --model prune of the same run: the entries it leaves unbound stay (a moved tensor is bound again by content key), and the next run removes those still unbound', async () => {
    // The cache of v1; the model re-sharded under new names: --prune-other-shards removes every binding of the old names.
    const v1 = join(temp.path, 'model-v1');
    const resharded = join(temp.path, 'model-resharded');
    const cache = join(temp.path, 'model-cache');
    await writeShardedTestModel(v1, [a, b, c], 2 * 8192);
    await writeShardedTestModel(resharded, [a, b, c], 2 * 8192, 'renamed');
    await build(v1, cache);
    const dry = await gcJson(cache, '--model', resharded, '--prune-other-shards', '--drop-unbound-entries', '--dry-run');
    expect(dry.bindings).toMatchObject({ dryRun: true, removed: 0 });
    expect(dry.bindings!.prune).toHaveLength(3);
    expect(dry.unboundEntries).toMatchObject({ dryRun: true, count: 0 });

    const dryText = await runInProcess(['gc', cache, '--model', resharded, '--prune-other-shards', '--drop-unbound-entries', '--dry-run']);
    expect(dryText.out).not.toMatch(/^kept \d+ entr/m);
    const real = await gcJson(cache, '--model', resharded, '--prune-other-shards', '--drop-unbound-entries');
    expect(real.bindings).toMatchObject({ removed: 3 });
    expect(real.unboundEntries).toMatchObject({ dryRun: false, count: 0 });
    // The entries the prune left unbound are counted, so the run does not read as if there were none.
    expect(real.unboundAfterPrune).toEqual({ count: 3, compBytes: expect.any(Number), ofModel: 3 });
    expect({ ...real.unboundEntries, dryRun: true, needsExclusive: false }).toEqual(dry.unboundEntries);
    // The re-sharded model's tensors are those entries' bytes: still there, unbound.
    expect(await qualnames(cache)).toEqual(['a.weight:0', 'b.weight:0', 'c.weight:0']);
    expect(await readdir(join(cache, 'blobs'))).toHaveLength(3);
    // Its build finds them by content key and binds them: nothing encoded again; the next drop removes none.
    const rebuilt = await runInProcess(['build', resharded, '--out', cache, '--jobs', '0', '--json']);
    expect(rebuilt.code, rebuilt.err).toBe(0);
    expect(JSON.parse(rebuilt.out)).toMatchObject({ encoded: 0, cached: 3 });
    expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:1', 'c.weight:1']);
    expect((await gcJson(cache, '--drop-unbound-entries')).unboundEntries).toMatchObject({ count: 0 });

    // Without the rebuild, the next run removes the entries the prune left unbound.
    // A space in its path: the build to copy quotes it, in backticks (kept whole on its line).
    const other = join(temp.path, 'model cache 2');
    await build(v1, other);
    const pruned = await runInProcess(['gc', other, '--model', resharded, '--prune-other-shards', '--drop-unbound-entries']);
    expect(pruned.out).toMatch(/^removed 0 unbound entries \(0 B\)$/m);
    expect(pruned.out).toContain(`kept 3 entries (`);
    // Within 120 columns (~300 before), its rest 4 columns in: the sentence whole once unwrapped.
    expect(pruned.out.split('\n').filter((line) => line.length > 120)).toEqual([]);
    expect(pruned.out.replace(/\n {4}/g, ' ')).toContain(`) bound to no slice once the prune ran, for the next --drop-unbound-entries; all are named as this model's tensors: build the model first (\`splitzip build ${resharded} --out '${other}'\`), which binds its moved tensors among them instead of encoding them again`);
    expect((await gcJson(other, '--drop-unbound-entries')).unboundEntries).toMatchObject({ count: 3, blobsLeft: [] });
    expect(await qualnames(other)).toEqual([]);
    expect(await readdir(join(other, 'blobs'))).toEqual([]);
  });

  it("after build --repair salvaged a damaged manifest, refuses (exit 1) until the kept copy is moved, removing no other model's entries", async () => {
    const modelA = join(temp.path, 'salvage-a');
    const modelB = join(temp.path, 'salvage-b');
    const cache = join(temp.path, 'salvage-cache');
    await writeShardedTestModel(modelA, [a], 8192);
    await writeShardedTestModel(modelB, [b, c], 8192);
    await build(modelA, cache);
    await build(modelB, cache);
    const manifest = join(cache, 'manifest.json');
    const text = await readFile(manifest, 'utf8');
    // One changed digit: the checksum fails, every command refuses the manifest until --repair.
    const damaged = text.replace(/("comp_bytes":\s*)(\d)/, (_m, lead: string, digit: string) => `${lead}${(Number(digit) + 1) % 10}`);
    expect(damaged).not.toBe(text);
    await writeFile(manifest, damaged);
    await build(modelA, cache, '--repair');
    const salvaged = await qualnames(cache);
    // Model B's entries kept, bound to nothing: B's own build --repair binds them again.
    expect(salvaged).toEqual(expect.arrayContaining(['a.weight:1', 'b.weight:0']));
    const kept = (await readdir(cache)).filter((name) => name.startsWith('manifest.json.damaged-'));
    expect(kept).toHaveLength(1);
    // An orphan blob: the refused run fails before its collection removes it.
    const orphan = join(cache, 'blobs', `${'e'.repeat(40)}.bin`);
    await writeFile(orphan, 'not a blob');
    for (const dryRun of [['--dry-run'], []]) {
      const refused = await runInProcess(['gc', cache, '--drop-unbound-entries', ...dryRun]);
      expect(refused.code, refused.err).toBe(1);
      expect(refused.err).toMatch(/MANIFEST_INVALID: dropUnboundEntries refuses while the cache holds a damaged manifest's kept copy/);
      expect(refused.err).toMatch(/splitzip build <model> --out <cache> --repair/);
      expect(refused.err).toMatch(/then move or remove the kept manifest\.json\.damaged-\* copy \(after inspecting it\)/);
    }
    expect(await qualnames(cache)).toEqual(salvaged);
    expect(existsSync(orphan)).toBe(true);
    // inspect does not advise the drop it refuses.
    expect((await runInProcess(['inspect', cache])).out).toMatch(/^unbound \d+ entr(y|ies) \([^)]+\): gc --drop-unbound-entries refuses now: MANIFEST_INVALID: while the cache holds a damaged\n {4}manifest's kept copy /m);
    // As it says: B bound again, the copy moved away; then the drop removes nothing of either model.
    await build(modelB, cache, '--repair');
    const aside = join(temp.path, 'salvage-kept');
    await mkdir(aside);
    await rename(join(cache, kept[0]!), join(aside, kept[0]!));
    expect((await gcJson(cache, '--drop-unbound-entries')).unboundEntries).toMatchObject({ count: 0 });
    expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:1', 'c.weight:1']);
  });

  it("--prune-other-shards: another model's entries the prune left unbound are counted without advising this model's build", async () => {
    const m1 = join(temp.path, 'own-m1');
    const m2 = join(temp.path, 'own-m2');
    const cache = join(temp.path, 'own-cache');
    await writeShardedTestModel(m1, [a, b, c], 2 * 8192);
    await writeShardedTestModel(m2, [gaussianBf16('x.weight', [64, 64], 1201)], 2 * 8192, 'other');
    await build(m1, cache);
    await build(m2, cache);
    const run = await runInProcess(['gc', cache, '--model', m1, '--prune-other-shards', '--drop-unbound-entries']);
    expect(run.code, run.err).toBe(0);
    expect(run.out).toMatch(/^kept 1 entry \(\d+(\.\d+)? KiB\) bound to no slice once the prune ran, for the next --drop-unbound-entries$/m);
    expect(run.out).not.toContain('build the model first');
  });

  it('Ctrl-C during the drop (which runs to its end) says what the drop removed, and the prune does not run', async () => {
    const { cache, v2 } = await fineTunedCache('interrupt');
    const probe = await openCacheStore(cache);
    const proto = Object.getPrototypeOf(probe) as { dropUnboundEntries: (...args: unknown[]) => Promise<unknown> };
    await probe.close();
    const original = proto.dropUnboundEntries;
    const controller = new AbortController();
    proto.dropUnboundEntries = async function (this: unknown, ...args: unknown[]) {
      const result = await original.apply(this, args);
      // The real drop finishing, then a Ctrl-C: before the prune.
      if ((args[0] as { dryRun?: boolean } | undefined)?.dryRun !== true) controller.abort(new Error('interrupted by SIGINT'));
      return result;
    };
    try {
      const { io, out, err } = memoryIo();
      const code = await runCli(['gc', cache, '--model', v2, '--drop-unbound-entries'], { io, signal: controller.signal });
      expect(code, err()).toBe(130);
      expect(out()).toBe('');
      expect(err()).toMatch(/interrupted by SIGINT: stopped after removing 1 unbound entry \(\d+(\.\d+)? KiB\) and their blobs; the --model prune did not run/);
    } finally {
      proto.dropUnboundEntries = original;
    }
    expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:1', 'c.weight:1']);
  });

  it("a real drop that fails after the collection ran keeps the collection's report (text and --json), then the store's error, exit 1", async () => {
    const { cache, v2 } = await fineTunedCache('late-refusal');
    const probe = await openCacheStore(cache);
    const proto = Object.getPrototypeOf(probe) as { dropUnboundEntries: (options?: { dryRun?: boolean }) => Promise<unknown> };
    await probe.close();
    const original = proto.dropUnboundEntries;
    // Its dry run answers; the real drop, after the collection, fails (as an s3:// drop's request can).
    // Its message holds an ESC: shown escaped on stderr, as every other error line is.
    proto.dropUnboundEntries = async function (this: unknown, options: { dryRun?: boolean } = {}) {
      if (options.dryRun === true) return original.call(this, options);
      throw new StoreError('S3_ERROR', 'the entry DELETE failed \u001b[31m(a test)', { path: cache, details: { reason: 'a-test' } });
    };
    const orphans = ['e', 'f'].map((c) => join(cache, 'blobs', `${c.repeat(40)}.bin`));
    try {
      await writeFile(orphans[0]!, 'not a blob');
      const text = await runInProcess(['gc', cache, '--model', v2, '--drop-unbound-entries']);
      expect(text.code, text.err).toBe(1);
      expect(text.out).toMatch(/^removed 1 orphan blob \(10 B\), 0 temp files/m);
      expect(text.out).toContain(`  blobs/${'e'.repeat(40)}.bin`);
      expect(text.out).not.toMatch(/unbound entr/);
      expect(text.err).toContain('splitzip gc: error: S3_ERROR: the entry DELETE failed \\u001b[31m(a test)');
      expect(text.err).not.toContain('\u001b');
      expect(text.err).toContain('; the collection ran before it (the report says what it removed); the --model prune did not run');
      expect(existsSync(orphans[0]!)).toBe(false);

      await writeFile(orphans[1]!, 'not a blob');
      const json = await runInProcess(['gc', cache, '--drop-unbound-entries', '--json']);
      expect(json.code, json.err).toBe(1);
      const document = JSON.parse(json.out) as GcCommandReport & { error: { code: string; message: string; reason: string } };
      expect(document.dryRun).toBe(false);
      expect(document.orphanBlobs).toEqual([`blobs/${'f'.repeat(40)}.bin`]);
      expect(document.unboundEntries).toBeUndefined();
      expect(document.error).toMatchObject({ code: 'S3_ERROR', reason: 'a-test', message: expect.stringContaining('the collection ran before it') });
      expect(json.err).toContain(document.error.message.replace('\u001b', '\\u001b'));
      expect(json.err).not.toContain('\u001b');
    } finally {
      proto.dropUnboundEntries = original;
    }
    // Nothing of the drop or the prune happened.
    expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:0', 'b.weight:1', 'c.weight:1']);
  });

  it('a drop failure whose cache then fails to close is still one --json document (the close named in its error)', async () => {
    const { cache } = await fineTunedCache('late-refusal-close');
    const probe = await openCacheStore(cache);
    const proto = Object.getPrototypeOf(probe) as {
      dropUnboundEntries: (options?: { dryRun?: boolean }) => Promise<unknown>;
      close: () => Promise<void>;
    };
    await probe.close();
    const originalDrop = proto.dropUnboundEntries;
    const originalClose = proto.close;
    proto.dropUnboundEntries = async function (this: unknown, options: { dryRun?: boolean } = {}) {
      if (options.dryRun === true) return originalDrop.call(this, options);
      throw new StoreError('INVALID_ARGUMENT', 'dropUnboundEntries refuses (a test)', { path: cache });
    };
    // The real close runs (the lock goes), then fails as a compaction on close can (ENOSPC).
    proto.close = async function (this: unknown) {
      await originalClose.call(this);
      throw new StoreError('IO_ERROR', 'compaction on close failed (a test)', { path: cache });
    };
    try {
      const json = await runInProcess(['gc', cache, '--drop-unbound-entries', '--json']);
      expect(json.code, json.err).toBe(1);
      // One document: JSON.parse of the whole output fails on two.
      const document = JSON.parse(json.out) as GcCommandReport & { error: { code: string; message: string } };
      expect(document.orphanBlobs).toEqual([]);
      expect(document.error.code).toBe('INVALID_ARGUMENT');
      expect(document.error.message).toContain('closing the cache failed too: IO_ERROR: compaction on close failed (a test)');
    } finally {
      proto.dropUnboundEntries = originalDrop;
      proto.close = originalClose;
    }
  });

  it("a drop's blobsMissing (entries a writer bound whose blob is gone: not put back): a line of what it means and the build to run, the cache quoted; in --json", async () => {
    const { cache } = await fineTunedCache('blobs missing');
    const probe = await openCacheStore(cache);
    const proto = Object.getPrototypeOf(probe) as { dropUnboundEntries: (options?: { dryRun?: boolean }) => Promise<unknown> };
    await probe.close();
    const original = proto.dropUnboundEntries;
    // The store reports it on s3:// only (and should never): stubbed on the real run.
    const missing = [`blobs/${'a'.repeat(64)}.${'b'.repeat(64)}.bin`];
    // And a drop that stopped early, after resolving a killed drop's intent (s3:// only too).
    const left = `entries/${'c'.repeat(32)}.${'d'.repeat(64)}.json`;
    const extra = {
      staleDropIntents: ['dropping/x.json.0123456789ab'],
      staleDropResolution: { restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: ['dropping/x.json.0123456789ab'] },
      stopped: { reason: 'paused', leftToResolver: [left] },
    };
    proto.dropUnboundEntries = async function (this: unknown, options: { dryRun?: boolean } = {}) {
      const report = (await original.call(this, options)) as Record<string, unknown>;
      return options.dryRun === true ? report : { ...report, blobsMissing: missing, ...extra };
    };
    try {
      const text = await runInProcess(['gc', cache, '--drop-unbound-entries']);
      expect(text.code, text.err).toBe(0);
      // Within 120 columns: a longer line goes on 6 columns in (its quoted cache path kept whole).
      expect(text.out.split('\n').every((line) => line.length <= 120)).toBe(true);
      expect(text.out.replace(/\n {6}/g, ' ')).toContain(
        'found 1 blob missing under entries a writer bound meanwhile: not put back, their tensors load raw until a build\n' +
          `  \`splitzip build <model> --out '${cache}'\` with each model that uses the cache stores them again\n`,
      );
      // The object name folds (142 columns), its pieces joined are the name.
      expect(text.out.replace(/\n {6}/g, '')).toContain(`\n  ${missing[0]}\n`);
      // Prose lines wrap 4 columns deeper than they start (0 or 2).
      const joined = text.out.replace(/\n {4,6}(?=\S)/g, ' ');
      expect(joined).toContain('resolved 1 intent object of killed drops first (entry put back if bound, else its blob removed)\n');
      expect(joined).toContain('resolved 1 damaged intent object (no drop intent, or no valid entry in it) by name: never put back\n  dropping/x.json.0123456789ab\n');
      expect(joined).toContain('stopped early: it ran 3h into one batch (paused: asleep, or in a debugger); the other unbound entries stay for a later --drop-unbound-entries\n');
      expect(joined).toContain(`once their intents are 6h old:\n  ${left}\n`);
      const json = await gcJson(cache, '--drop-unbound-entries');
      expect(json.unboundEntries!.blobsMissing).toEqual(missing);
      expect(json.unboundEntries).toMatchObject(extra);
    } finally {
      proto.dropUnboundEntries = original;
    }
    // None: no line.
    expect((await runInProcess(['gc', cache, '--drop-unbound-entries'])).out).not.toMatch(/missing|stores them again|intent|stopped/);
  });

  it('a dry run says the real run needs no --exclusive on a directory (--json: unboundEntries.needsExclusive false)', async () => {
    const { cache } = await fineTunedCache('dry-dir');
    const dry = await gcJson(cache, '--drop-unbound-entries', '--dry-run');
    expect(dry.unboundEntries).toMatchObject({ dryRun: true, count: 1, needsExclusive: false });
    expect((await runInProcess(['gc', cache, '--drop-unbound-entries', '--dry-run'])).out).not.toContain('--exclusive');
    // A real run's report has no such field: it ran.
    expect((await gcJson(cache, '--drop-unbound-entries')).unboundEntries).not.toHaveProperty('needsExclusive');
  });
});

describeS3('gc --drop-unbound-entries on an s3:// cache', () => {
  const bucket = uniqueBucket('gcdrop');
  afterAll(async () => {
    const client = rawClient();
    await dropBucket(client, bucket);
    client.destroy();
  });

  it('--drop-unbound-entries on s3:// needs no --exclusive (since 2026-12-07: no usage error); --exclusive without --drop-unbound-entries is one', async () => {
    // A bucket that does not exist: the run gets as far as its first request (exit 1, not 2).
    const missing = `s3://${uniqueBucket('gcdropnone')}/cache`;
    const ran = await runInProcess(['gc', missing, '--drop-unbound-entries']);
    expect(ran.code, ran.err).toBe(1);
    expect(ran.err).not.toContain('--exclusive');
    const alone = await runInProcess(['gc', missing, '--exclusive']);
    expect(alone.code, alone.err).toBe(2);
    expect(alone.err).toContain("option '--exclusive' needs '--drop-unbound-entries'");
  });

  it('a dry run on a cache written to a moment ago, with no unbound entry: would remove 0, no refusal (since 2026-12-07), exit 0', async () => {
    const model = join(temp.path, 's3-none-v1');
    const cache = `s3://${bucket}/none`;
    await writeShardedTestModel(model, [a, c], 2 * 8192);
    await build(model, cache);
    const dry = await runInProcess(['gc', cache, '--drop-unbound-entries', '--dry-run']);
    expect(dry.code, dry.err).toBe(0);
    expect(dry.err).toBe('');
    expect(dry.out).toMatch(/^would remove 0 unbound entries \(0 B\)$/m);
    expect(dry.out).not.toMatch(/refused|--exclusive|run without --dry-run/);
    const json = await gcJson(cache, '--drop-unbound-entries', '--dry-run');
    expect(json.unboundEntries).toMatchObject({ dryRun: true, count: 0, entries: [], reclaimedBytes: 0, needsExclusive: false });
    expect(json.unboundEntries).not.toHaveProperty('dropRefusal');
  });

  it('removes the unbound entries older than --min-age (default 1h) with their blobs, without --exclusive; on a cache just written it runs and keeps the young ones; verify passes', async () => {
    const { cache, v2, oldB } = await fineTunedCache('s3', `s3://${bucket}/drop`);
    // Just built: the unbound entry is younger than any --min-age the command takes: kept, exit 0.
    const young = await runInProcess(['gc', cache, '--drop-unbound-entries']);
    expect(young.code, young.err).toBe(0);
    expect(young.out).toMatch(/^removed 0 unbound entries \(0 B\)$/m);
    const youngDry = await gcJson(cache, '--drop-unbound-entries', '--dry-run');
    expect(youngDry.unboundEntries).toMatchObject({ dryRun: true, count: 0, needsExclusive: false });
    expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:0', 'b.weight:1', 'c.weight:1']);
    // --exclusive is still accepted (no effect).
    expect((await runInProcess(['gc', cache, '--drop-unbound-entries', '--exclusive'])).code).toBe(0);
    const probe = await openCacheStore(cache);
    const proto = Object.getPrototypeOf(probe) as { dropUnboundEntries: (options?: Record<string, unknown>) => Promise<unknown> };
    await probe.close();
    const original = proto.dropUnboundEntries;
    expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:0', 'b.weight:1', 'c.weight:1']);
    // The store's drop, taken below the floor (the entries are a moment old): what the command asks of it is recorded.
    const asked: Record<string, unknown>[] = [];
    proto.dropUnboundEntries = async function (this: unknown, options: Record<string, unknown> = {}) {
      asked.push(options);
      return original.call(this, { ...options, minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    };
    try {
      const dry = await gcJson(cache, '--drop-unbound-entries', '--dry-run', '--min-age', '40m');
      // The real run needs no --exclusive: the dry run says only to run it.
      expect(dry.unboundEntries).toMatchObject({ dryRun: true, count: 1, entries: [{ key: oldB, qualname: 'b.weight' }], needsExclusive: false });
      const dryText = await runInProcess(['gc', cache, '--drop-unbound-entries', '--dry-run', '--min-age', '40m']);
      expect(dryText.code, dryText.err).toBe(0);
      expect(dryText.out).toMatch(/^would remove 1 unbound entry \(\d+(\.\d+)? KiB\)$/m);
      expect(dryText.out).not.toContain('--exclusive');
      expect(dryText.out).toMatch(/\nrun without --dry-run to remove them\n$/);
      expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:0', 'b.weight:1', 'c.weight:1']);
      const text = await runInProcess(['gc', cache, '--drop-unbound-entries', '--min-age', '40m']);
      expect(text.code, text.err).toBe(0);
      expect(text.out).toMatch(new RegExp(`^removed 1 unbound entry \\(\\d+(\\.\\d+)? KiB\\)\\n  ${oldB} b\\.weight `, 'm'));
    } finally {
      proto.dropUnboundEntries = original;
    }
    // --min-age is the drop's too; a real run looks first (a dry run).
    expect(asked).toEqual([
      { dryRun: true, minAgeMs: 40 * 60_000 },
      { dryRun: true, minAgeMs: 40 * 60_000 },
      { dryRun: true, minAgeMs: 40 * 60_000 },
      { dryRun: false, minAgeMs: 40 * 60_000 },
    ]);
    expect(await qualnames(cache)).toEqual(['a.weight:1', 'b.weight:1', 'c.weight:1']);
    const verify = await runInProcess(['verify', cache, '--model', v2]);
    expect(verify.code, verify.out + verify.err).toBe(0);
    const client = rawClient();
    const objects = await listObjects(client, bucket);
    client.destroy();
    // Its entry object and blob are gone (v1's alias below the slice's top epoch stays: it binds nothing).
    expect(objects.filter((o) => o.key.includes(oldB) && !o.key.includes('/slices/'))).toEqual([]);
    expect(objects.filter((o) => o.key.includes('drop/entries/'))).toHaveLength(3);
  });
});

