import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { resumeShardedModelWrite, writeShardedModel } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';
import { observe, snapshot, tensors } from './commit-fixtures.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const worker = join(here, 'fixtures', 'commit-kill-worker.mjs');

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.js'))) throw new Error('build the package first (pnpm turbo run build --filter @splitzip/safetensors)');
});

/** Runs the worker (an overwrite of `root` with the new model); with `stopAt`, SIGKILLs it before its commit's operation `stopAt`. */
function runWorker(root: string, stopAt: number, maxShardBytes: number): Promise<{ ops: string[]; signal: NodeJS.Signals | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, root, String(stopAt), String(maxShardBytes)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.split('\n').some((line) => line.startsWith(`op ${stopAt} `))) child.kill('SIGKILL');
    });
    child.on('error', reject);
    child.on('exit', (_code, signal) => resolve({ ops: stdout.split('\n').filter((line) => line.startsWith('op ')), signal, stderr }));
  });
}



describe('a sharded writer killed (SIGKILL) during its commit', () => {
  // 8: 3 old shards -> 2 new ones; 4: 3 -> 3 of the same names and shapes (an old shard looks like a new one in place).
  for (const maxShardBytes of [8, 4]) {
    it(`leaves a directory that resumeShardedModelWrite() finishes, byte for byte, at every operation of the commit (new maxShardBytes ${maxShardBytes})`, async () => {
      await withTempDir(async (dir) => {
        const reference = join(dir, 'reference');
        await writeShardedModel(reference, tensors(2), { maxShardBytes });
        const expected = await snapshot(reference);
        const root = join(dir, 'm');
        await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
        const full = await runWorker(root, -1, maxShardBytes);
        expect(full.stderr).toBe('');
        expect(await snapshot(root)).toEqual(expected);
        // op 0 removes the commit lock's temp (the lock is linked from it, text and all); op 1 puts the
        // commit record in place; then old shards and index go, new shards come, the index, the
        // record goes; last, the commit lock is released.
        expect(full.ops[0]).toMatch(/^op 0 unlink \.model\.safetensors\.index\.json\.commit\.lock\.tmp-/);
        expect(full.ops[1]).toMatch(/^op 1 rename \.\.model\.safetensors\.index\.json\.commit\.tmp-/);
        expect(full.ops.at(-2)).toMatch(/ unlink \.model\.safetensors\.index\.json\.commit$/);
        expect(full.ops.at(-1)).toMatch(/ unlink \.model\.safetensors\.index\.json\.commit\.lock$/);
        let refused = 0;
        for (let stopAt = 0; stopAt < full.ops.length; stopAt += 1) {
          await rm(root, { recursive: true, force: true });
          await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
          const run = await runWorker(root, stopAt, maxShardBytes);
          expect(run.signal, full.ops[stopAt]).toBe('SIGKILL');
          const seen = await observe(root);
          if (stopAt <= 1 || stopAt === full.ops.length - 1) {
            // Killed before its record was in place (the old model whole) or after it was removed
            // (the new one whole, its dead lock left: the next commit breaks it): nothing to resume.
            expect(seen).toBe(stopAt <= 1 ? 'old' : 'new');
            expectCode(await catchErrorAsync(() => resumeShardedModelWrite(root)), 'COMMIT_RECORD_MISSING');
            continue;
          }
          if (seen !== 'old' && seen !== 'new') {
            expect(seen, full.ops[stopAt]).toContain(`resumeShardedModelWrite("${root}") finishes it`);
            refused += 1;
          }
          // The killed writer's pid is dead: no option needed (its lock is broken).
          await resumeShardedModelWrite(root);
          // Every file as an uninterrupted write leaves it, and nothing else (the killed writer's temps and lock removed).
          expect(await snapshot(root), full.ops[stopAt]).toEqual(expected);
          expect(await observe(root)).toBe('new');
          expectCode(await catchErrorAsync(() => resumeShardedModelWrite(root)), 'COMMIT_RECORD_MISSING');
        }
        expect(refused).toBeGreaterThan(2);
        // The lock a writer killed after its commit left is a dead one's: the next write breaks it.
        await writeShardedModel(root, tensors(2), { maxShardBytes });
        expect(await snapshot(root)).toEqual(expected);
      });
    });
  }
});
