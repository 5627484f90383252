// store.removeAbandonedTempFiles: the temp files gc would remove, and nothing else, for a writer to
// call on every run (a build killed mid-write left its staged blobs, up to a payload each, until a gc).
import { spawnSync } from 'node:child_process';
import { readdir, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore, TEMP_FILE_MAX_AGE_MS } from '../src/index.js';
import { pidSpaceTag } from '../src/write-lock.js';
import { catchError, makeCache, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

/** This process's pid space: only a name with it has a pid that can be judged dead here. */
const tag = pidSpaceTag();

function deadPid(): number {
  return spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
}

/** A writer lock held by a live process other than this one (the test runner's parent). */
function liveLock(): string {
  return JSON.stringify({ pid: process.ppid, host: hostname(), bootId: null, startTicks: null, token: 'cccccccccccccccc', createdMs: Date.now() });
}

describe('removeAbandonedTempFiles', () => {
  it("removes dead writers' and stale temp files only, reporting them with their bytes; what else gc removes stays", async () => {
    const { root, tensors } = await makeCache();
    const dead = deadPid();
    const orphan = `${'d'.repeat(40)}.bin`;
    await writeFile(join(root, 'blobs', `.tmp-${dead}-0123456789abcdef.${tag}.bin`), Buffer.alloc(1000));
    await writeFile(join(root, `.tmp-${dead}-0123456789abcdef.${tag}.manifest`), '{}');
    await writeFile(join(root, 'blobs', `.tmp-${process.ppid}-0123456789abcdef.bin`), Buffer.alloc(10)); // a live writer's
    const stale = join(root, 'blobs', `.tmp-${process.ppid}-aaaaaaaaaaaaaaaa.bin`); // a live pid's, too old to be its
    await writeFile(stale, Buffer.alloc(24));
    const oldSeconds = (Date.now() - TEMP_FILE_MAX_AGE_MS - 60_000) / 1000;
    await utimes(stale, oldSeconds, oldSeconds);
    await writeFile(join(root, 'blobs', orphan), Buffer.alloc(512));
    await writeFile(join(root, 'journal.1'), 'old');
    await writeFile(join(root, 'lock.break-bbbbbbbbbbbbbbbb'), JSON.stringify({ pid: dead, host: hostname(), token: 'bbbbbbbbbbbbbbbb', createdMs: 0 }));

    const store = await openCacheStore(root);
    // What gc would remove as temp files is exactly what this removes.
    const planned = (await store.gc({ dryRun: true })).tempFiles.sort();
    const report = await store.removeAbandonedTempFiles!();
    expect(report.tempFiles.sort()).toEqual(planned);
    expect(report.tempFiles.sort()).toEqual([`.tmp-${dead}-0123456789abcdef.${tag}.manifest`, `blobs/.tmp-${dead}-0123456789abcdef.${tag}.bin`, `blobs/.tmp-${process.ppid}-aaaaaaaaaaaaaaaa.bin`].sort());
    expect(report.tempBytes).toBe(1000 + 2 + 24);
    expect((await readdir(join(root, 'blobs'))).sort()).toEqual([`.tmp-${process.ppid}-0123456789abcdef.bin`, `${tensors[0]!.key}.bin`, orphan].sort());
    expect((await readdir(root)).sort()).toEqual(['blobs', 'journal.1', 'journal.2', 'lock.break-bbbbbbbbbbbbbbbb', 'manifest.json']);
    // gc still finds the rest.
    const after = await store.gc({ dryRun: true });
    expect(after).toMatchObject({ tempFiles: [], orphanBlobs: [`blobs/${orphan}`], oldJournals: ['journal.1'], staleLocks: ['lock.break-bbbbbbbbbbbbbbbb'] });
    expect(await store.removeAbandonedTempFiles!()).toEqual({ tempFiles: [], tempBytes: 0 });
    expect((await store.verify()).ok).toBe(true);
    await store.close();
  });

  it('takes the writer lock only when there is a temp file to remove', async () => {
    const { root } = await makeCache();
    await writeFile(join(root, 'lock'), liveLock());
    const store = await openCacheStore(root, { lockTimeoutMs: 200 });
    // Nothing to remove: no wait behind the live holder.
    expect(await store.removeAbandonedTempFiles!()).toEqual({ tempFiles: [], tempBytes: 0 });
    await writeFile(join(root, 'blobs', `.tmp-${deadPid()}-0123456789abcdef.${tag}.bin`), Buffer.alloc(10));
    expect((await catchError(() => store.removeAbandonedTempFiles!())).code).toBe('LOCK_TIMEOUT');
    expect((await readdir(join(root, 'blobs'))).filter((name) => name.startsWith('.tmp-'))).toHaveLength(1);
    await store.close();
  });

  it("never judges the pid of a temp file from another pid space (a container or host sharing the cache), or of an untagged name, only its age", async () => {
    const { root } = await makeCache();
    const dead = deadPid();
    // A live writer in another container may have this pid number, dead here: its staged blob,
    // written outside the lock, was removed by every build's sweep.
    const foreign = `.tmp-${dead}-0123456789abcdef.0badc0de.bin`;
    const legacy = `.tmp-${dead}-abcdefabcdefabcd.bin`;
    const oldForeign = `.tmp-${dead}-1111111111111111.0badc0de.bin`;
    for (const name of [foreign, legacy, oldForeign]) await writeFile(join(root, 'blobs', name), Buffer.alloc(10));
    const old = (Date.now() - TEMP_FILE_MAX_AGE_MS - 60_000) / 1000;
    await utimes(join(root, 'blobs', oldForeign), old, old);
    const store = await openCacheStore(root);
    try {
      expect((await store.removeAbandonedTempFiles!()).tempFiles).toEqual([`blobs/${oldForeign}`]);
      // Kept, and said so: a killed older build's staged blobs were invisible to gc for a day.
      const dry = await store.gc({ dryRun: true });
      expect(dry.tempFiles).toEqual([]);
      expect([...dry.keptTempFiles!].sort()).toEqual([`blobs/${foreign}`, `blobs/${legacy}`].sort());
      expect(dry.keptTempBytes).toBe(20);
      const real = await store.gc();
      expect([...real.keptTempFiles!].sort()).toEqual([`blobs/${foreign}`, `blobs/${legacy}`].sort());
    } finally {
      await store.close();
    }
    expect((await readdir(join(root, 'blobs'))).filter((name) => name.startsWith('.tmp-')).sort()).toEqual([foreign, legacy].sort());
  });

  it("this process's own temp names carry its pid space tag", async () => {
    const { root } = await makeCache();
    const store = await openCacheStore(root);
    try {
      const { tempName } = await import('../src/fs-backend.js');
      expect(tempName('.bin')).toMatch(new RegExp(`^\\.tmp-${process.pid}-[0-9a-f]{16}\\.${tag}\\.bin$`));
    } finally {
      await store.close();
    }
  });
});
