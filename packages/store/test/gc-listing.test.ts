// gc lstat'ed every file of the cache, one after another, for sizes and ages it needs of a few:
// ~100 us a blob, most of its 6.6 s on a cache of 64k entries. It now lists names with their types
// and looks up (lstat) only the root's files, temp files and orphan blobs; the report and what is
// removed are as before, links and other non-files included, and a file gone before its lstat is
// skipped as it was. lstat is wrapped to see which files are looked at.
import { spawnSync } from 'node:child_process';
import type * as FsPromises from 'node:fs/promises';
import { mkdir, readdir, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { pidSpaceTag } from '../src/write-lock.js';
import { makeCache, removeTempDirs } from './helpers.js';

const watch = vi.hoisted(() => ({ seen: [] as string[], before: undefined as ((path: string) => Promise<void>) | undefined }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof FsPromises>();
  return {
    ...actual,
    lstat: async (...args: Parameters<typeof actual.lstat>) => {
      watch.seen.push(String(args[0]));
      await watch.before?.(String(args[0]));
      return actual.lstat(...args);
    },
  };
});

afterEach(async () => {
  watch.before = undefined;
  await removeTempDirs();
});

function deadPid(): number {
  return spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
}

const ORPHANS = [`${'a'.repeat(40)}.bin`, `${'b'.repeat(40)}.bin`];
const DEAD_TEMP = `.tmp-${deadPid()}-0123456789abcdef.${pidSpaceTag()}.bin`;
/** A live writer's (the test runner's parent): kept. */
const LIVE_TEMP = `.tmp-${process.ppid}-0123456789abcdef.bin`;

/** A cache of 20 entries whose blobs/ also holds orphans, temp files, a link, a directory and a stray file. */
async function cacheWithLitter(): Promise<{ root: string; blobs: string[] }> {
  const { root, tensors } = await makeCache(20);
  const blobs = tensors.map((t) => `${t.key}.bin`);
  const dir = join(root, 'blobs');
  await writeFile(join(dir, ORPHANS[0]!), Buffer.alloc(512));
  await writeFile(join(dir, ORPHANS[1]!), Buffer.alloc(300));
  await writeFile(join(dir, DEAD_TEMP), Buffer.alloc(1000));
  await writeFile(join(dir, LIVE_TEMP), Buffer.alloc(10));
  // A link named as a blob no entry has, to a blob one has; a directory named as one; others' files.
  await symlink(join(dir, blobs[0]!), join(dir, `${'c'.repeat(40)}.bin`));
  await mkdir(join(dir, `${'d'.repeat(40)}.bin`));
  await mkdir(join(dir, 'sub'));
  await writeFile(join(dir, 'notes.txt'), 'x');
  return { root, blobs };
}

const UNKNOWN = ['blobs/notes.txt', 'blobs/sub', `blobs/${'c'.repeat(40)}.bin`, `blobs/${'d'.repeat(40)}.bin`];

it('gc looks up (lstat) no blob an entry references, and reports and removes what it did', async () => {
  const { root, blobs } = await cacheWithLitter();
  const store = await openCacheStore(root);
  try {
    for (const dryRun of [true, false]) {
      watch.seen = [];
      const report = await store.gc({ dryRun });
      const looked = watch.seen.filter((path) => path.startsWith(join(root, 'blobs') + '/')).map((path) => path.slice(join(root, 'blobs').length + 1));
      expect(looked.filter((name) => blobs.includes(name))).toEqual([]);
      expect(report).toMatchObject({
        dryRun,
        orphanBytes: 812,
        tempFiles: [`blobs/${DEAD_TEMP}`],
        keptTempFiles: [`blobs/${LIVE_TEMP}`],
        keptTempBytes: 10,
      });
      expect([...report.orphanBlobs].sort()).toEqual(ORPHANS.map((name) => `blobs/${name}`));
      expect([...report.unknownFiles].sort()).toEqual([...UNKNOWN].sort());
    }
    const left = (await readdir(join(root, 'blobs'))).sort();
    expect(left).toEqual([...blobs, LIVE_TEMP, 'notes.txt', 'sub', `${'c'.repeat(40)}.bin`, `${'d'.repeat(40)}.bin`].sort());
    expect((await store.verify({ decode: true })).ok).toBe(true);
  } finally {
    await store.close();
  }
});

it('an orphan or temp file removed between the listing and its lstat is skipped, as before', async () => {
  const { root } = await cacheWithLitter();
  const store = await openCacheStore(root);
  try {
    const gone = new Set([join(root, 'blobs', ORPHANS[0]!), join(root, 'blobs', DEAD_TEMP)]);
    watch.before = async (path) => {
      if (gone.delete(path)) await unlink(path);
    };
    const report = await store.gc();
    expect(gone.size).toBe(0);
    expect(report).toMatchObject({ orphanBlobs: [`blobs/${ORPHANS[1]!}`], orphanBytes: 300, tempFiles: [] });
    expect([...report.unknownFiles].sort()).toEqual([...UNKNOWN].sort());
  } finally {
    await store.close();
  }
});
