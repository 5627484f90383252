// verify notes what a gc or writer stopped at once leaves for the next gc (a second Ctrl-C during
// gc --drop-unbound-entries: blobs of entries already gone from the manifest, the writer lock of a
// dead pid), naming `splitzip gc`, without failing the check (exit 0, "ok": true); it said nothing of
// them before. Found by gc's dry run; null where gc refuses to look (a damaged journal). Run in this process.
import { spawnSync } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { openCacheStore, pidSpaceTag, type CacheEntry } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VerifyCommandReport } from '../src/commands/verify.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-verify-leftovers-');
});
afterAll(async () => temp?.cleanup());

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  return runInProcess(argv);
}

async function verifyJson(cache: string, expectedCode = 0): Promise<VerifyCommandReport> {
  const result = await run('verify', cache, '--json');
  expect(result.code, result.err).toBe(expectedCode);
  return JSON.parse(result.out) as VerifyCommandReport;
}

/** The pid of a process of this host that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  expect(child.status).toBe(0);
  return child.pid;
}

/**
 * A cache of model v1 and its fine-tune v2 (b changed) built with --rebind, v1's b entry made unbound
 * (its binding removed by its key), then gc --drop-unbound-entries stopped at once after its manifest:
 * v1's b entry is gone, its blob is still there, and so is the lock of the gc's dead process.
 */
async function cacheLeftByStoppedDrop(name: string): Promise<{ cache: string; orphan: string; orphanBytes: number }> {
  const v1 = join(temp.path, `${name}-v1`);
  const v2 = join(temp.path, `${name}-v2`);
  const cache = join(temp.path, `${name}-cache`);
  await writeShardedTestModel(v1, [gaussianBf16('a.weight', [64, 64], 1301), gaussianBf16('b.weight', [64, 64], 1302)], 8192);
  await writeShardedTestModel(v2, [gaussianBf16('a.weight', [64, 64], 1301), gaussianBf16('b.weight', [64, 64], 1399)], 8192);
  let oldEntry: CacheEntry | undefined;
  for (const [model, extra] of [[v1, []], [v2, ['--rebind']]] as const) {
    const built = await run('build', model, '--out', cache, '--jobs', '0', '--quiet', ...extra);
    expect(built.code, built.err).toBe(0);
    if (model !== v1) continue;
    const store = await openCacheStore(cache);
    oldEntry = [...store.entries()].find((e) => e.qualname === 'b.weight')!;
    await store.close();
  }
  // v1's b binding, which a directory cache keeps beside v2's since 0.56 (one binding per file), goes
  // (v1's file gone), leaving its entry unbound as --rebind did before; none where --rebind moved it.
  const oldB = oldEntry!.key;
  const [shardName, offsetBytes, sizeBytes] = oldEntry!.sliceKeys[0]!;
  const store = await openCacheStore(cache);
  try {
    await store.unbindSlices([{ shardName, offsetBytes, sizeBytes, key: oldB }]);
    expect([...store.entries()].filter((e) => e.sliceKeys.length === 0).map((e) => e.key)).toEqual([oldB]);
  } finally {
    await store.close();
  }
  const orphan = `blobs/${oldB}.bin`;
  const bytes = await readFile(join(cache, orphan));
  const dropped = await run('gc', cache, '--drop-unbound-entries');
  expect(dropped.code, dropped.err).toBe(0);
  // What the exit at once left: the blob not yet unlinked, the lock of the process that is gone.
  await writeFile(join(cache, orphan), bytes);
  await writeFile(join(cache, 'lock'), JSON.stringify({ pid: deadPid(), host: hostname(), bootId: null, startTicks: null, token: '0123456789abcdef', createdMs: Date.now() }));
  return { cache, orphan, orphanBytes: bytes.length };
}

/** What a writer killed mid-write (kill -9 of a build) leaves besides: its staged blobs, `count` temp files named with its dead pid. */
async function addDeadWritersTempFiles(cache: string, count: number): Promise<string[]> {
  const pid = deadPid();
  const names = Array.from({ length: count }, (_, i) => `blobs/.tmp-${pid}-${i.toString(16).padStart(16, '0')}.${pidSpaceTag()}.bin`);
  for (const name of names) await writeFile(join(cache, name), Buffer.alloc(1000));
  return names.sort();
}

describe('verify notes what gc clears', () => {
  it('orphan blobs and a dead writer\'s lock: notes naming splitzip gc, exit 0 and "ok" as for a clean cache; gone once gc ran', async () => {
    const { cache, orphan, orphanBytes } = await cacheLeftByStoppedDrop('stopped');
    const text = await run('verify', cache);
    expect(text.code, text.err).toBe(0);
    // A note past 120 columns goes on under its text (8 columns in).
    expect(text.out.replace(/\n {8}/g, ' ')).toMatch(new RegExp(`^  note: 1 orphan blob \\(\\d+(\\.\\d+)? KiB\\) no entry references \\(a gc or build stopped at once, a crash, or a build not yet committed\\): \`splitzip gc ${cache}\` removes them$`, 'm'));
    expect(text.out.replace(/\n {8}/g, ' ')).toContain(`  note: a stale lock of a dead writer (lock): \`splitzip gc ${cache}\` removes it (the next writer also recovers the lock)\n`);
    expect(text.out).not.toContain('FAIL');
    expect(text.out.trimEnd().split('\n').at(-1)).toBe('OK');

    const json = await verifyJson(cache);
    expect(json.ok).toBe(true);
    expect(json.store.problems).toEqual([]);
    expect(json.leftovers).toEqual({ orphanBlobs: [orphan], orphanBytes, staleLocks: ['lock'], tempFiles: [] });

    // As the notes say: gc removes both, and verify says nothing more.
    const gc = await run('gc', cache);
    expect(gc.code, gc.err).toBe(0);
    expect(await readdir(cache)).not.toContain('lock');
    const after = await run('verify', cache);
    expect(after.code, after.err).toBe(0);
    expect(after.out).not.toContain('note:');
    expect((await verifyJson(cache)).leftovers).toEqual({ orphanBlobs: [], orphanBytes: 0, staleLocks: [], tempFiles: [] });
  });

  it("a killed build's temp files (blobs/.tmp-<dead pid>-*): noted and in leftovers.tempFiles, as gc then removes them; exit 0", async () => {
    const { cache } = await cacheLeftByStoppedDrop('killed');
    const temps = await addDeadWritersTempFiles(cache, 10);
    const json = await verifyJson(cache);
    expect(json.ok).toBe(true);
    expect([...json.leftovers!.tempFiles].sort()).toEqual(temps);
    const text = await run('verify', cache);
    expect(text.code, text.err).toBe(0);
    expect(text.out.replace(/\n {8}/g, ' ')).toMatch(new RegExp(`^  note: 10 temp files of dead writers or older than 24 h \\(blobs/\\.tmp-\\d+-\\S+, blobs/\\.tmp-\\d+-\\S+, blobs/\\.tmp-\\d+-\\S+ and 7 more\\): \`splitzip gc ${cache}\` removes them$`, 'm'));
    expect(text.out.trimEnd().split('\n').at(-1)).toBe('OK');
    // The ones gc removes.
    const gc = await run('gc', cache, '--json');
    expect(gc.code, gc.err).toBe(0);
    expect([...(JSON.parse(gc.out) as { tempFiles: string[] }).tempFiles].sort()).toEqual(temps);
    expect((await verifyJson(cache)).leftovers?.tempFiles).toEqual([]);
  });

  it('with --model too, and beside a failed check: the notes do not change the exit code', async () => {
    const { cache } = await cacheLeftByStoppedDrop('failing');
    const store = await openCacheStore(cache);
    const bound = [...store.entries()].find((e) => e.qualname === 'a.weight')!.key;
    await store.close();
    // A bound entry's blob gone: a real problem (exit 1), the notes as before.
    await writeFile(join(cache, 'blobs', `${bound}.bin`), 'damaged');
    const json = await verifyJson(cache, 1);
    expect(json.ok).toBe(false);
    expect(json.store.problems.map((p) => p.key)).toEqual([bound]);
    expect(json.leftovers?.staleLocks).toEqual(['lock']);
    expect(json.leftovers?.orphanBlobs).toHaveLength(1);
    const model = join(temp.path, 'failing-v2');
    const withModel = await run('verify', cache, '--model', model);
    expect(withModel.code).toBe(1);
    expect(withModel.out).toMatch(/^ {2}note: 1 orphan blob /m);
    expect(withModel.out.trimEnd().split('\n').at(-1)).toBe('FAILED');
  });

  it('a damaged journal, which gc refuses to look beside: "leftovers" null, no note, exit 1 for the damage as before', async () => {
    const { cache } = await cacheLeftByStoppedDrop('journal');
    const journal = (await readdir(cache)).find((name) => /^journal\.\d+$/.test(name))!;
    const bytes = await readFile(join(cache, journal));
    bytes[3]! ^= 0x40; // the magic
    await writeFile(join(cache, journal), bytes);
    const json = await verifyJson(cache, 1);
    expect(json.store.problems.map((p) => p.code)).toEqual(['JOURNAL_INVALID']);
    expect(json.leftovers).toBeNull();
    expect((await run('verify', cache)).out).not.toContain('note:');
  });
});
