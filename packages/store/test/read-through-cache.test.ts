// The read-through directory's own upkeep, without a server: a directory removed under a live
// handle, and temp files left by writers that died.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ReadThroughCache } from '../src/read-through-cache.js';
import { pidSpaceTag } from '../src/write-lock.js';
import { TEMP_FILE_MAX_AGE_MS } from '../src/limits.js';
import { makeTempDir, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

const KEY = 'a'.repeat(40);
const SHA = 'b'.repeat(64);

/** A pid that was alive a moment ago and is not now (a child that has exited and been reaped). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
  return Number(child.stdout.trim());
}

describe('the read-through directory', () => {
  it('is made again when removed under a live handle (every later copy failed: each load fetched everything anew)', async () => {
    const dir = join(await makeTempDir(), 'rt');
    const cache = new ReadThroughCache(dir);
    const bytes = new Uint8Array(randomBytes(1000));
    await cache.write(KEY, SHA, bytes);
    await rm(dir, { recursive: true });
    await cache.write(KEY, SHA, bytes);
    const back = new Uint8Array(1000);
    expect(await cache.readInto(KEY, SHA, back)).toBe(true);
    expect(back).toEqual(bytes);
  });

  it('puts a copy where a directory took its place, moving the directory aside whole (the copy was never written: every load fetched anew)', async () => {
    const dir = await makeTempDir();
    const cache = new ReadThroughCache(dir);
    await mkdir(join(dir, `${KEY}.${SHA}.bin`));
    await writeFile(join(dir, `${KEY}.${SHA}.bin`, 'kept.txt'), 'not ours');
    const bytes = new Uint8Array(randomBytes(100));
    await cache.write(KEY, SHA, bytes);
    const back = new Uint8Array(100);
    expect(await cache.readInto(KEY, SHA, back)).toBe(true);
    expect(back).toEqual(bytes);
    const aside = (await readdir(dir)).filter((name) => name.startsWith(`${KEY}.${SHA}.bin.displaced-`));
    expect(aside).toHaveLength(1);
    expect(await readFile(join(dir, aside[0]!, 'kept.txt'), 'utf8')).toBe('not ours');
  });

  it("removes dead writers' temp files and old ones, never a live writer's recent one, another host's recent one, or anything else", async () => {
    const dir = await makeTempDir();
    const host = pidSpaceTag();
    const dead = `.tmp-${deadPid()}-0123456789ab.${host}.bin`;
    // Another pid space's writer (a container, another host over NFS): its pid means nothing here, only its age does.
    const otherHostDead = `.tmp-${deadPid()}-0123456789ab.${host === '00000000' ? '11111111' : '00000000'}.bin`;
    const untaggedDead = `.tmp-${deadPid()}-0123456789ab.bin`; // an older version's name: age alone
    const liveRecent = `.tmp-${process.ppid}-0123456789ab.${host}.bin`; // our parent: alive
    const liveOld = `.tmp-${process.ppid}-ba9876543210.${host}.bin`;
    const ours = `.tmp-${process.pid}-0123456789ab.${host}.bin`;
    const other = 'range.not-a-temp.bin';
    for (const name of [dead, otherHostDead, untaggedDead, liveRecent, liveOld, ours, other]) await writeFile(join(dir, name), 'x');
    const old = (Date.now() - TEMP_FILE_MAX_AGE_MS - 60_000) / 1000;
    await utimes(join(dir, liveOld), old, old);
    const cache = new ReadThroughCache(dir);
    await cache.write(KEY, SHA, new Uint8Array(10)); // the first write of a handle clears them
    const expected = [otherHostDead, untaggedDead, liveRecent, ours, other, `${KEY}.${SHA}.bin`].sort();
    const listing = async (): Promise<string[]> => (await readdir(dir)).sort();
    // The sweep runs beside the write, not before it.
    for (let i = 0; i < 200 && JSON.stringify(await listing()) !== JSON.stringify(expected); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await listing()).toEqual(expected);
  });
});
