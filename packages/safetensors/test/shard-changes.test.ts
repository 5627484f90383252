import { execFileSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { chmod, open, readFile, rename, stat, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { STAMP_CHECK_INTERVAL_MS, isSameFileContentStamp, isShardHeaderUnchanged, isSameFileIgnoringCtime, iterateTensors, openSafetensorsModel, readFileStamp, readShardDescriptorPath, readShardStamp, readTensorBytes, writeSafetensorsFile } from '../src/index.js';
import { catchErrorAsync, createRandom, expectCode, randomBytes, withTempDir } from './helpers.js';

async function writeModel(path: string, seed: number) {
  const random = createRandom(seed);
  const tensors = [
    { name: 'a', dtype: 'BF16' as const, shape: [64], data: randomBytes(random, 128) },
    { name: 'b', dtype: 'U8' as const, shape: [5], data: randomBytes(random, 5) },
  ];
  await writeSafetensorsFile(path, tensors);
  return tensors;
}

describe('a shard file that changes under an open model', () => {
  it('rewritten in place: reads throw SHARD_CHANGED naming the file and tensor, and readShardStamp tells', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const before = await writeModel(path, 1);
      const model = await openSafetensorsModel(path);
      try {
        const shard = model.shards[0]!;
        expect(readShardStamp(model, shard.name)).toBe(shard.stamp);
        expect(await readTensorBytes(model, 'a')).toEqual(before[0]!.data);
        // Same layout, other bytes, written through the same inode (as `cp` over it or an editor does).
        const after = await writeModel(join(dir, 'next.safetensors'), 2);
        const handle = await open(path, 'r+');
        await handle.write(await readFile(join(dir, 'next.safetensors')), 0);
        await handle.close();
        await utimes(path, new Date(), new Date(Date.now() + 5_000));
        await sleep(STAMP_CHECK_INTERVAL_MS + 5); // a read checks once the last check is that old
        expect(readShardStamp(model, shard.name)).not.toBe(shard.stamp);
        const error = await catchErrorAsync(() => readTensorBytes(model, 'a'));
        expectCode(error, 'SHARD_CHANGED');
        expect(error.message).toContain('open the model again');
        expect(error.file).toBe(path);
        expect(error.tensor).toBe('a');
        expectCode(await catchErrorAsync(async () => {
          for await (const _ of iterateTensors(model)) void _;
        }), 'SHARD_CHANGED');
        // A new model handle reads the new file.
        const again = await openSafetensorsModel(path);
        expect(await readTensorBytes(again, 'a')).toEqual(after[0]!.data);
        await again.close();
      } finally {
        await model.close();
      }
      expect(readShardStamp(model, 'model.safetensors')).toBeNull();
    });
  });

  it('the check runs at most once per STAMP_CHECK_INTERVAL_MS per shard: the first read after that throws', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      await writeModel(path, 5);
      const model = await openSafetensorsModel(path);
      try {
        await sleep(STAMP_CHECK_INTERVAL_MS + 5);
        await readTensorBytes(model, 'b'); // checked now
        await utimes(path, new Date(), new Date(Date.now() + 5_000));
        await sleep(STAMP_CHECK_INTERVAL_MS + 5);
        expectCode(await catchErrorAsync(() => readTensorBytes(model, 'b')), 'SHARD_CHANGED');
        // It stays refused: a failed check records nothing.
        expectCode(await catchErrorAsync(() => readTensorBytes(model, 'a')), 'SHARD_CHANGED');
      } finally {
        await model.close();
      }
    });
  });

  it('a read in flight when the model closes completes with its bytes (no stamp check on a closed file)', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const tensors = await writeModel(path, 6);
      for (let i = 0; i < 5; i++) {
        const model = await openSafetensorsModel(path);
        await sleep(STAMP_CHECK_INTERVAL_MS + 4); // so the read's check is due
        const read = readTensorBytes(model, 'a');
        await model.close();
        expect(await read).toEqual(tensors[0]!.data);
      }
    });
  });

  it('replaced by a rename: the open model keeps reading the file it opened, unchanged', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const before = await writeModel(path, 3);
      const model = await openSafetensorsModel(path);
      try {
        await writeModel(join(dir, 'next.safetensors'), 4);
        await rename(join(dir, 'next.safetensors'), path);
        // Unlinked by the rename, the opened file's ctime moved; its size and mtime did not.
        expect(isSameFileContentStamp(readShardStamp(model, model.shards[0]!.name)!, model.shards[0]!.stamp!)).toBe(true);
        expect(await readTensorBytes(model, 'a')).toEqual(before[0]!.data);
        expect(readShardStamp(model, 'no-such-shard')).toBeNull();
        // The descriptor path still names the file the model opened, not the one now at its path.
        const held = readShardDescriptorPath(model, model.shards[0]!.name)!;
        if (process.platform === 'linux') {
          expect(held).toMatch(/^\/proc\/self\/fd\/\d+$/);
          expect(readlinkSync(held)).toMatch(/model\.safetensors \(deleted\)$/);
        }
        expect(readShardDescriptorPath(model, 'no-such-shard')).toBeNull();
      } finally {
        await model.close();
      }
    });
  });

  it('a chmod under an open model moves its stamp (ctime), not its bytes: reads go on', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const before = await writeModel(path, 5);
      const model = await openSafetensorsModel(path);
      try {
        const opened = model.shards[0]!.stamp!;
        await sleep(STAMP_CHECK_INTERVAL_MS + 20);
        await chmod(path, 0o600);
        const now = readShardStamp(model, model.shards[0]!.name)!;
        expect(now).not.toBe(opened);
        expect(isSameFileContentStamp(now, opened)).toBe(true);
        expect(await readTensorBytes(model, 'a')).toEqual(before[0]!.data);
      } finally {
        await model.close();
      }
    });
  });
});

describe('a rewrite that restores the mtime (cp -p, rsync --inplace -t, touch -r): only the ctime moves', () => {
  /** Writes `tensors` over `path` through its inode, then puts its old mtime back to the nanosecond (`touch -r`: utimes takes ms). */
  async function rewriteKeepingMtime(dir: string, path: string, tensors: Parameters<typeof writeSafetensorsFile>[1]): Promise<void> {
    const reference = join(dir, 'times.ref');
    execFileSync('touch', ['-r', path, reference]);
    await writeSafetensorsFile(join(dir, 'next.safetensors'), tensors);
    const bytes = await readFile(join(dir, 'next.safetensors'));
    expect(bytes.length).toBe((await stat(path)).size); // same size: only the header tells
    const handle = await open(path, 'r+');
    await handle.write(bytes, 0);
    await handle.close();
    execFileSync('touch', ['-r', reference, path]);
  }

  /** Two tensors of 128 bytes each: in the other order the header has the same length. */
  async function writeTwins(path: string, seed: number) {
    const random = createRandom(seed);
    const tensors = [
      { name: 'a', dtype: 'BF16' as const, shape: [64], data: randomBytes(random, 128) },
      { name: 'b', dtype: 'U8' as const, shape: [128], data: randomBytes(random, 128) },
    ];
    await writeSafetensorsFile(path, tensors);
    return tensors;
  }

  it('another header (its tensors in another order): reads throw SHARD_CHANGED, they read the old offsets before', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const before = await writeTwins(path, 7);
      const model = await openSafetensorsModel(path);
      try {
        const name = model.shards[0]!.name;
        await sleep(STAMP_CHECK_INTERVAL_MS + 20); // a ctime tick later
        await rewriteKeepingMtime(dir, path, [before[1]!, before[0]!]);
        const now = readShardStamp(model, name)!;
        expect(isSameFileContentStamp(now, model.shards[0]!.stamp!)).toBe(true); // size and mtime cannot tell
        // The old header's offsets of 'a' hold b's bytes now.
        expectCode(await catchErrorAsync(() => readTensorBytes(model, 'a')), 'SHARD_CHANGED');
        expect(isShardHeaderUnchanged(model, name)).toBe(false);
      } finally {
        await model.close();
      }
    });
  });

  it('the same header, other tensor bytes: reads go on and give the bytes there now; the header is read once per ctime', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const before = await writeModel(path, 8);
      const model = await openSafetensorsModel(path);
      try {
        const name = model.shards[0]!.name;
        await sleep(STAMP_CHECK_INTERVAL_MS + 20);
        const after = [{ ...before[0]!, data: before[0]!.data.map((b) => b ^ 0x5a) }, before[1]!];
        await rewriteKeepingMtime(dir, path, after);
        expect(isShardHeaderUnchanged(model, name)).toBe(true);
        expect(await readTensorBytes(model, 'a')).toEqual(after[0]!.data);
      } finally {
        await model.close();
      }
    });
  });
});

describe('file stamps', () => {
  it('are <size>:<mtime ns>:<ctime ns>:<inode>: two files of one size and mtime (touch -r, rsync -t, tar) have other stamps', async () => {
    await withTempDir(async (dir) => {
      const a = join(dir, 'a.safetensors');
      const b = join(dir, 'b.safetensors');
      await writeModel(a, 6);
      await sleep(20);
      await writeModel(b, 7);
      // One time for both, whole seconds (utimes takes no nanoseconds): as tar or a pinned file system leaves them.
      const pinned = new Date(1_700_000_000_000);
      await utimes(a, pinned, pinned);
      await utimes(b, pinned, pinned);
      const stampA = readFileStamp(a)!;
      const stampB = readFileStamp(b)!;
      const info = await stat(a, { bigint: true });
      expect(stampA).toBe(`${info.size}:${info.mtimeNs}:${info.ctimeNs}:${info.ino}`);
      expect(stampB.split(':').slice(0, 2)).toEqual(stampA.split(':').slice(0, 2));
      expect(stampB).not.toBe(stampA);
      // Their content parts agree: only a reader of ONE open file compares those alone.
      expect(isSameFileContentStamp(stampA, stampB)).toBe(true);
      expect(isSameFileContentStamp('1:2:3:4', '1:3:3:4')).toBe(false);
      expect(isSameFileContentStamp('1:2:3:4', '1:2:5:6')).toBe(true);
      expect(isSameFileContentStamp('etag:"x"', 'etag:"x"')).toBe(true);
      expect(isSameFileContentStamp('etag:"x"', 'etag:"y"')).toBe(false);
      // Not cut at a colon: ETags may hold them.
      expect(isSameFileContentStamp('etag:"a:1"', 'etag:"a:2"')).toBe(false);
      // By path: the inode counts, the ctime does not.
      expect(isSameFileIgnoringCtime(stampA, stampB)).toBe(false);
      expect(isSameFileIgnoringCtime('1:2:3:4', '1:2:9:4')).toBe(true);
      expect(isSameFileIgnoringCtime('1:2:3:4', '1:2:3:5')).toBe(false);
      expect(isSameFileIgnoringCtime('etag:"a:1"', 'etag:"a:2"')).toBe(false);
    });
  });
});
