import { readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { createShardedModelWriter, isSafetensorsError, openSafetensorsModel, readTensorBytes, writeSafetensorsFile, writeShardedModel, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const names = ['a', 'b', 'c'];
const tensors = (fill: number): TensorToWrite[] => names.map((name) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(fill) }));

/** What a reader finds in `dir`: 'old' (every byte 1), 'new' (every byte 2), 'refused <code>', or 'MIXED ...'. */
async function observe(dir: string): Promise<string> {
  let model;
  try {
    model = await openSafetensorsModel(dir);
  } catch (error) {
    if (isSafetensorsError(error)) return `refused ${error.code}`;
    throw error;
  }
  try {
    const fills = new Set<number>();
    for (const tensor of model.tensors) for (const byte of await readTensorBytes(model, tensor)) fills.add(byte);
    const complete = model.tensors.map((t) => t.name).join() === names.join();
    if (complete && fills.size === 1 && fills.has(1)) return 'old';
    if (complete && fills.size === 1 && fills.has(2)) return 'new';
    return `MIXED ${model.tensors.map((t) => t.name).join()} bytes ${[...fills].join('/')}`;
  } finally {
    await model.close();
  }
}

afterEach(() => setCommitStepObserver(undefined));

describe('overwriting a sharded model', () => {
  it('abort midway leaves the old model intact and no temp file (shards were committed one by one before)', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      const before = (await readdir(root)).sort();
      const writer = await createShardedModelWriter(root, tensors(2), { maxShardBytes: 4 });
      await writer.write(new Uint8Array(6).fill(2)); // shard 1 complete, shard 2 half
      expect(await observe(root)).toBe('old');
      await writer.abort();
      expect(await observe(root)).toBe('old');
      expect((await readdir(root)).sort()).toEqual(before);
    });
  });

  it('abort() during a write() in flight waits for it, then removes every temp (the write fails WRITER_CLOSED)', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      const before = (await readdir(root)).sort();
      // At every point of the write: abort() right away, and after each of a few turns of the event loop.
      for (let turns = 0; turns < 12; turns += 1) {
        const writer = await createShardedModelWriter(root, tensors(2), { maxShardBytes: 4 });
        const writing = writer.write(new Uint8Array(12).fill(2)).then(
          () => 'written',
          (error: unknown) => (isSafetensorsError(error) ? error.code : String(error)),
        );
        for (let i = 0; i < turns; i += 1) await new Promise((done) => setImmediate(done));
        await writer.abort();
        expect(await writing).toMatch(/^(written|WRITER_CLOSED)$/);
        expect((await readdir(root)).sort()).toEqual(before);
        expect(await observe(root)).toBe('old');
        await expect(writer.write(new Uint8Array(1))).rejects.toMatchObject({ code: 'WRITER_CLOSED' });
      }
    });
  });

  it('a failed write (too many bytes) after a complete shard leaves the old model intact', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      const writer = await createShardedModelWriter(root, tensors(2), { maxShardBytes: 4 });
      expectCode(await catchErrorAsync(() => writer.write(new Uint8Array(13).fill(2))), 'WRITE_SIZE_MISMATCH');
      expect(await observe(root)).toBe('old');
      expect((await readdir(root)).filter((n) => n.includes('.tmp-'))).toEqual([]);
    });
  });

  // Old: 3 shards of 4 bytes. New: 3 shards again (same names) or 2 shards (other names).
  for (const newMaxShardBytes of [4, 8]) {
    it(`a reader at every commit step, or a failure there, finds the old model, the new one, or refuses (new maxShardBytes ${newMaxShardBytes})`, async () => {
      await withTempDir(async (dir) => {
        const root = join(dir, 'm');
        const seen: string[] = [];
        await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
        setCommitStepObserver(async (step) => void seen.push(`${step}: ${await observe(root)}`));
        await writeShardedModel(root, tensors(2), { maxShardBytes: newMaxShardBytes });
        setCommitStepObserver(undefined);
        expect(await observe(root)).toBe('new');
        expect(seen.length).toBeGreaterThan(5);
        for (const line of seen) expect(line).toMatch(/: (old|new|refused [A-Z_]+)$/);
        // Before anything is removed, the old model; after the last rename, the new one.
        expect(seen[0]).toMatch(/: old$/);
        // The index is written over the complete new numbered set; then the commit record goes.
        expect(seen.at(-2)).toMatch(/^write-index: new$/);
        expect(seen.at(-1)).toMatch(/^remove-commit-record: new$/);

        // A failure at step k: before the first old file is removed, the write fails and the old
        // model stays; after it, the commit rolls forward and the new model is in place. No temp left.
        for (let k = 0; k < seen.length; k += 1) {
          await rm(root, { recursive: true, force: true });
          await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
          let calls = 0;
          setCommitStepObserver(() => {
            if (calls++ === k) throw new Error(`fault at step ${k}`);
          });
          const outcome = await writeShardedModel(root, tensors(2), { maxShardBytes: newMaxShardBytes }).then(
            () => 'written',
            (error: Error) => error.message,
          );
          setCommitStepObserver(undefined);
          if (k === 0) expect(outcome).toContain(`fault at step ${k}`);
          else expect(outcome).toBe('written');
          expect(await observe(root)).toBe(k === 0 ? 'old' : 'new');
          expect((await readdir(root)).filter((n) => n.includes('.tmp-'))).toEqual([]);
        }
      });
    });
  }

  it('a commit that keeps failing after the old shards went keeps the staged new shards and names them (WRITE_INCOMPLETE)', async () => {
    await withTempDir(async (dir) => {
      await writeShardedModel(dir, tensors(1), { maxShardBytes: 4 });
      setCommitStepObserver((step) => {
        if (step === 'rename-shard 2') throw Object.assign(new Error('no space (simulated)'), { code: 'ENOSPC' });
      });
      const error = await catchErrorAsync(() => writeShardedModel(dir, tensors(2), { maxShardBytes: 4 }));
      setCommitStepObserver(undefined);
      expectCode(error, 'WRITE_INCOMPLETE');
      const staged = (error as { staged?: { temporaryPath: string; path: string }[] }).staged ?? [];
      expect(staged.map(({ path }) => path)).toEqual([join(dir, 'model-00002-of-00003.safetensors'), join(dir, 'model-00003-of-00003.safetensors')]);
      expect(error.message).toContain('the model is incomplete');
      // The new model is all there: shard 1 in place, shards 2-3 under the temp names the error gives.
      for (const { temporaryPath, path } of staged) {
        expect(error.message).toContain(`${temporaryPath} -> ${path}`);
        await rename(temporaryPath, path);
      }
      // Without its index the complete numbered set opens as the new model.
      expect(await observe(dir)).toBe('new');
    });
  });

  // WRITE_INCOMPLETE said "the old model was removed" in an empty directory, and "could not be put
  // in place" when only the index was missing.
  it('WRITE_INCOMPLETE says what is so: no old model to remove; every shard in place but the index', async () => {
    await withTempDir(async (dir) => {
      setCommitStepObserver((step) => {
        if (step === 'write-index') throw Object.assign(new Error('no space (simulated)'), { code: 'ENOSPC' });
      });
      const error = await catchErrorAsync(() => writeShardedModel(dir, tensors(2), { maxShardBytes: 4 }));
      setCommitStepObserver(undefined);
      expectCode(error, 'WRITE_INCOMPLETE');
      expect((error as { staged?: unknown[] }).staged).toEqual([]);
      expect(error.message).not.toContain('old model');
      expect(error.message).toContain('every new shard is in place, but');
      expect(await observe(dir)).toBe('new');
    });
  });

  it('a one-off failure after the old shards went rolls forward: the new model is written', async () => {
    await withTempDir(async (dir) => {
      await writeShardedModel(dir, tensors(1), { maxShardBytes: 4 });
      let failed = false;
      setCommitStepObserver((step) => {
        if (step === 'rename-shard 2' && !failed) {
          failed = true;
          throw Object.assign(new Error('no space (simulated)'), { code: 'ENOSPC' });
        }
      });
      await writeShardedModel(dir, tensors(2), { maxShardBytes: 4 });
      setCommitStepObserver(undefined);
      expect(failed).toBe(true);
      expect(await observe(dir)).toBe('new');
      expect((await readdir(dir)).filter((n) => n.includes('.tmp-'))).toEqual([]);
    });
  });

  it('a directory with a model file the write would not replace is refused before anything is written (WRITE_OTHER_MODEL_FILE)', async () => {
    const write = (dir: string, options: { shardNamePrefix?: string; indexFileName?: string } = {}) =>
      writeShardedModel(dir, tensors(2), { maxShardBytes: 4, ...options });
    const expectRefused = async (dir: string, file: string, options?: { shardNamePrefix?: string; indexFileName?: string }) => {
      const before = (await readdir(dir)).sort();
      const error = await catchErrorAsync(() => write(dir, options));
      expectCode(error, 'WRITE_OTHER_MODEL_FILE');
      expect(error.file).toBe(join(dir, file));
      expect((await readdir(dir)).sort()).toEqual(before);
    };
    // A: a single model.safetensors (HF transformers would load it, not the shards).
    await withTempDir(async (dir) => {
      await writeSafetensorsFile(join(dir, 'model.safetensors'), tensors(1));
      await writeFile(join(dir, 'config.json'), '{}');
      await expectRefused(dir, 'model.safetensors');
    });
    // D2: shards and index of another prefix and name.
    await withTempDir(async (dir) => {
      await writeShardedModel(dir, tensors(1), { maxShardBytes: 4, shardNamePrefix: 'old', indexFileName: 'old.safetensors.index.json' });
      await expectRefused(dir, 'old-00001-of-00003.safetensors', { shardNamePrefix: 'new', indexFileName: 'new.safetensors.index.json' });
    });
    // D3: the same shard prefix under an index of another name.
    await withTempDir(async (dir) => {
      await writeShardedModel(dir, tensors(1), { maxShardBytes: 4 });
      await expectRefused(dir, 'model.safetensors.index.json', { indexFileName: 'new.safetensors.index.json' });
    });
    // Non-model files are allowed, and the model of the same names is replaced.
    await withTempDir(async (dir) => {
      await writeShardedModel(dir, tensors(1), { maxShardBytes: 4 });
      await writeFile(join(dir, 'config.json'), '{}');
      await writeFile(join(dir, 'tokenizer.json'), '{}');
      await write(dir, {});
      expect(await observe(dir)).toBe('new');
      expect((await readdir(dir)).filter((n) => n.endsWith('.json')).sort()).toEqual(['config.json', 'model.safetensors.index.json', 'tokenizer.json']);
    });
  });

  it('a directory without index refuses an incomplete or mixed numbered set (SHARD_SET_INCOMPLETE, naming the file)', async () => {
    await withTempDir(async (dir) => {
      const one = (name: string) => writeSafetensorsFile(join(dir, name), [{ name, dtype: 'U8', shape: [1], data: new Uint8Array(1) }]);
      await one('model-00001-of-00003.safetensors');
      await one('model-00003-of-00003.safetensors');
      const missing = await catchErrorAsync(() => openSafetensorsModel(dir));
      expectCode(missing, 'SHARD_SET_INCOMPLETE');
      expect(missing.message).toContain('model-00002-of-00003.safetensors');
      await one('model-00002-of-00002.safetensors');
      const mixed = await catchErrorAsync(() => openSafetensorsModel(dir));
      expectCode(mixed, 'SHARD_SET_INCOMPLETE');
      expect(mixed.message).toContain('model-00002-of-00002.safetensors');
      await rm(join(dir, 'model-00002-of-00002.safetensors'));
      await one('model-00002-of-00003.safetensors');
      await writeFile(join(dir, 'notes.txt'), 'x');
      await one('other.safetensors');
      expect((await openSafetensorsModel(dir)).tensors.map((t) => t.name)).toHaveLength(4);
    });
  });
});
