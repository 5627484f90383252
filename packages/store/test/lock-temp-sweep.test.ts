// A process killed while taking the writer lock (between writing its holder record to
// `lock.tmp-…` and unlinking it) left that file for good on a cache that only loaders use: only a
// build's sweep or gc removed it. Taking the lock now sweeps the lock's own abandoned attempts.
import { spawnSync } from 'node:child_process';
import { readdir, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { LOCK_TEMP_MIN_AGE_MS } from '../src/limits.js';
import { pidSpaceTag } from '../src/write-lock.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

function deadPid(): number {
  return spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
}

it("taking the writer lock removes the lock's abandoned temp files, and only those", async () => {
  const root = await makeTempDir();
  const store = await openCacheStore(root, { create: true, compactOnClose: false });
  const dead = deadPid();
  const tag = pidSpaceTag();
  const otherTag = tag === '00000000' ? '11111111' : '00000000';
  const record = '{"pid":1}';
  const names = {
    dead: `lock.tmp-${dead}-0123456789abcdef.${tag}`,
    deadBreak: `lock.break-0123456789abcdef.tmp-${dead}-1111111111111111.${tag}`,
    // An old one whose pid cannot be judged here (an untagged name from before pid space tags).
    oldUntagged: `lock.tmp-${dead}-2222222222222222`,
    // A live writer's attempt (this process), another pid space's (its pid means nothing here),
    // and another file's temp name: all stay.
    live: `lock.tmp-${process.pid}-3333333333333333.${tag}`,
    foreign: `lock.tmp-${dead}-4444444444444444.${otherTag}`,
    manifestTemp: `manifest.json.tmp-${dead}-5555555555555555.${tag}`,
    // A dead pid's attempt made just now: younger than LOCK_TEMP_MIN_AGE_MS, it stays (a pid space
    // misjudged must not cost a live attempt its temp file, which lives for milliseconds).
    deadYoung: `lock.tmp-${dead}-6666666666666666.${tag}`,
  };
  for (const name of Object.values(names)) await writeFile(join(root, name), record);
  const old = new Date(Date.now() - 48 * 3600_000);
  const minuteAgo = new Date(Date.now() - LOCK_TEMP_MIN_AGE_MS - 5_000);
  await utimes(join(root, names.oldUntagged), old, old);
  for (const name of [names.dead, names.deadBreak, names.live, names.foreign]) await utimes(join(root, name), minuteAgo, minuteAgo);

  await store.addEntry(toInput(makeTensor([8, 8], 1), 'w'));
  await store.close();

  const left = await readdir(root);
  expect(left).not.toContain(names.dead);
  expect(left).not.toContain(names.deadBreak);
  expect(left).not.toContain(names.oldUntagged);
  expect(left).toEqual(expect.arrayContaining([names.live, names.foreign, names.manifestTemp, names.deadYoung]));
});

it('a sweep that cannot list the directory does not fail the acquisition', async () => {
  const { removeAbandonedLockTemps } = await import('../src/remove-abandoned-lock-temps.js');
  expect(await removeAbandonedLockTemps('/nonexistent-splitzip-dir/lock')).toEqual([]);
});
