// The deepest break marker has no further marker to serialize its removal, so a recoverer moves it
// aside and judges the instance it moved. Here a racing recoverer's live marker takes the dead one's
// place just before the move: the rename is wrapped to swap it in, and that live marker must come
// back and keep excluding us.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type * as FsPromises from 'node:fs/promises';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

const race = vi.hoisted(() => ({ liveRecord: '' }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof FsPromises>();
  return {
    ...actual,
    rename: async (from: Parameters<typeof actual.rename>[0], to: Parameters<typeof actual.rename>[1]) => {
      if (race.liveRecord && String(to).includes('.reap-')) {
        await actual.writeFile(from, race.liveRecord);
        race.liveRecord = '';
      }
      return actual.rename(from, to);
    },
  };
});

afterEach(removeTempDirs);

function deadPid(): number {
  return spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
}

function holderRecord(pid: number, token: string): string {
  return JSON.stringify({ pid, host: hostname(), bootId: null, startTicks: null, token, createdMs: Date.now() });
}

describe('removing the deepest break marker', () => {
  it("puts back a racing recoverer's live marker instead of deleting it", async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, lockTimeoutMs: 300, compactOnClose: false });
    const tokens = ['0123456789abcdef', '1111111111111111', '2222222222222222', '3333333333333333', '4444444444444444'];
    let deepest = 'lock';
    for (const [level, token] of tokens.entries()) {
      await writeFile(join(root, deepest), holderRecord(deadPid(), token));
      if (level < tokens.length - 1) deepest = `${deepest}.break-${token}`;
    }
    // A live process (our parent) already replaced the dead deepest marker with its own.
    race.liveRecord = holderRecord(process.ppid, 'aaaaaaaaaaaaaaaa');
    const error = await catchError(() => store.addEntries([toInput(makeTensor([64], 1), 'a', [['s', 0, 128]])]));
    expect(race.liveRecord).toBe('');
    expect(error.code).toBe('LOCK_TIMEOUT');
    expect(error.message).toContain(`pid ${process.ppid}`);
    expect(JSON.parse(await readFile(join(root, deepest), 'utf8'))).toMatchObject({ token: 'aaaaaaaaaaaaaaaa' });
    expect((await readdir(root)).filter((n) => n.includes('.reap-'))).toEqual([]);
    expect(existsSync(join(root, 'lock'))).toBe(true);
    await store.close();
  });
});
