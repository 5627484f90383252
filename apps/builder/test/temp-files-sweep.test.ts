// A build removes the temp files of writers killed mid-write (staged blobs, up to a payload each),
// as gc would, and says so: after a SIGKILLed build the re-run succeeded and left them until a gc.
import { spawnSync } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pidSpaceTag } from '@splitzip/store';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import type { BuildJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
afterAll(async () => temp?.cleanup());

function deadPid(): number {
  return spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
}

const tempNames = async (cacheDir: string): Promise<string[]> => (await readdir(join(cacheDir, 'blobs'))).filter((name) => name.startsWith('.tmp-')).sort();

describe('build removes dead writers’ temp files', () => {
  it('removes them on the next build, reports count and bytes, and keeps a live writer’s', async () => {
    const model = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [gaussianBf16('a', [64, 64], 1), gaussianBf16('b', [64, 32], 2)]);
    const cacheDir = join(temp.path, 'cache');
    const first = await runJson<BuildJson>(['build', model, '--out', cacheDir, '--jobs', '0']);
    expect(first.json).toMatchObject({ encoded: 2, temp_files_removed: 0, temp_bytes_removed: 0 });

    // What a build SIGKILLed while staging blobs leaves (the store's temp name: pid, 16 hex digits,
    // the writer's pid space tag: this host's, as the CLI it runs is on it).
    const dead = deadPid();
    const tag = pidSpaceTag();
    await writeFile(join(cacheDir, 'blobs', `.tmp-${dead}-0123456789abcdef.${tag}.bin`), Buffer.alloc(5000));
    await writeFile(join(cacheDir, 'blobs', `.tmp-${dead}-fedcba9876543210.${tag}.bin`), Buffer.alloc(3000));
    const live = `.tmp-${process.ppid}-0123456789abcdef.${tag}.bin`; // a writer still running: not to be touched
    await writeFile(join(cacheDir, 'blobs', live), Buffer.alloc(10));

    const rerun = await runJson<BuildJson>(['build', model, '--out', cacheDir, '--jobs', '0']);
    expect(rerun.json).toMatchObject({ encoded: 0, cached: 2, temp_files_removed: 2, temp_bytes_removed: 8000 });
    expect(await tempNames(cacheDir)).toEqual([live]);

    await writeFile(join(cacheDir, 'blobs', `.tmp-${dead}-0000000000000000.${tag}.bin`), Buffer.alloc(2048));
    const text = await runCli(['build', model, '--out', cacheDir, '--jobs', '0', '--quiet']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^cleaned 1 temp file \(2\.00 KiB\) left by writers killed mid-write$/m);
    // Nothing left to clean: no line, nothing removed.
    const again = await runCli(['build', model, '--out', cacheDir, '--jobs', '0', '--quiet']);
    expect(again.stdout).not.toMatch(/cleaned/);
    expect(await tempNames(cacheDir)).toEqual([live]);
  });

  // A killed older build's staged blobs (untagged names, judged by age alone): gc kept them a day
  // and listed nothing, dry run included, so GBs of them were invisible.
  it('gc lists the temp files it keeps, with their size and when they go', async () => {
    const model = await writeSingleFileModel(join(temp.path, 'k.safetensors'), [gaussianBf16('a', [64, 64], 3)]);
    const cacheDir = join(temp.path, 'cache-kept');
    await runJson<BuildJson>(['build', model, '--out', cacheDir, '--jobs', '0']);
    const legacy = `.tmp-${deadPid()}-0123456789abcdef.bin`;
    await writeFile(join(cacheDir, 'blobs', legacy), Buffer.alloc(4096));
    for (const args of [['--dry-run'], []]) {
      const { json } = await runJson<{ tempFiles: string[]; keptTempFiles: string[]; keptTempBytes: number }>(['gc', cacheDir, ...args]);
      expect(json).toMatchObject({ tempFiles: [], keptTempFiles: [`blobs/${legacy}`], keptTempBytes: 4096 });
      const text = await runCli(['gc', cacheDir, ...args]);
      expect(text.code).toBe(0);
      // Within 120 columns (~210 before: which writers, and why only age judges them, are the README's).
      expect(text.stdout).toMatch(/^kept 1 temp file \(4\.00 KiB\) a writer may still be writing: each goes once 24 h old$/m);
      for (const line of text.stdout.split('\n')) expect(line.length, line).toBeLessThanOrEqual(120);
      // A kept file is nothing the real run removes: no "run without --dry-run" line.
      expect(text.stdout).not.toContain('run without --dry-run');
      expect(text.stdout).toContain(`  blobs/${legacy}`);
    }
    expect(await tempNames(cacheDir)).toEqual([legacy]);
  });
});
