// A first build killed before its first commit leaves a directory with no manifest.json: verify,
// inspect and gc said "not a SplitZip cache (no manifest.json in it)", as for a wrong path. They
// now say a first build stopped there, and the build named in the line finishes the cache.
import { spawnSync } from 'node:child_process';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/run-cli.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { memoryIo } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-interrupted-first-build-');
});
afterAll(async () => temp?.cleanup());

/** A pid no process holds now: a child's, once it has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  if (child.pid === undefined) throw new Error('could not start a child process');
  return child.pid;
}

/** The files a build killed between its lock and its first commit leaves: a dead writer's lock, blobs/, a manifest temp file. */
async function writeLeftovers(dir: string): Promise<void> {
  await mkdir(join(dir, 'blobs'), { recursive: true });
  const lock = { pid: deadPid(), host: hostname(), token: '0123456789abcdef', createdMs: Date.now() - 60_000, bootId: null, startTicks: null, pidNamespace: null };
  await writeFile(join(dir, 'lock'), JSON.stringify(lock));
  await writeFile(join(dir, 'blobs', '.tmp-1-abc.bin'), new Uint8Array(10));
  await writeFile(join(dir, '.tmp-1-def.manifest'), '{');
}

describe('a first build stopped before its first commit', () => {
  it('verify, inspect and gc say so and name the build that starts it again; that build makes the cache', async () => {
    const dir = join(temp.path, 'cache');
    await writeLeftovers(dir);
    for (const command of ['verify', 'inspect', 'gc']) {
      const { io, err } = memoryIo();
      expect(await runCli([command, dir], { io }), err()).toBe(1);
      expect(err()).toMatch(new RegExp(`^splitzip ${command}: error: NOT_A_CACHE: .*cache is not a SplitZip cache yet: a first build into it stopped before its first commit \\(it left \\.tmp-1-def\\.manifest, blobs, lock, and no manifest\\.json\\); \`splitzip build <model> --out .*cache\` starts it again`));
    }
    const model = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [gaussianBf16('w', [4000], 1)]);
    expect(await runCli(['build', model, '--out', dir, '--jobs', '0', '--quiet'], { io: memoryIo().io })).toBe(0);
    const { io, err } = memoryIo();
    expect(await runCli(['verify', dir, '--model', model, '--quiet'], { io }), err()).toBe(0);
  });

  it('an empty directory, or one holding anything else, keeps the plain line', async () => {
    const empty = join(temp.path, 'empty');
    await mkdir(empty);
    const other = join(temp.path, 'other');
    await writeLeftovers(other);
    await writeFile(join(other, 'notes.txt'), 'mine');
    for (const dir of [empty, other]) {
      const { io, err } = memoryIo();
      expect(await runCli(['verify', dir], { io }), err()).toBe(1);
      expect(err()).toMatch(/is not a SplitZip cache \(no manifest\.json in it\); `splitzip build <model> --out /);
      expect(err()).not.toMatch(/first build/);
    }
    expect(await readdir(other)).toContain('lock');
  });
});
