// Shards on a file system whose stamps prove nothing (squashfs and the like: two images of one layout
// give their files one stamp) are checked at every load and never recorded. The statfs answer is
// faked here (mounting an image needs root and loop devices); detectWeakFileSystem's table is tested as it is.
import type * as NodeFs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, readAllRaw, sameBytes, tunedWeights, writeModel, type FixtureTensor } from './fixtures.js';

const fake = vi.hoisted(() => ({
  weak: new Set<string>(),
  failing: new Set<string>(),
  overlays: new Set<string>(),
  squashfsLowers: new Set<string>(),
  overlayLowers: new Set<string>(),
  noProc: new Set<string>(),
  mountinfo: '',
}));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof NodeFs>();
  const isFake = (path: string) => fake.squashfsLowers.has(path) || fake.overlayLowers.has(path);
  // squashfs's magic for the shard files of the directories marked weak (and the fake lower
  // directories), overlay's for those marked so; the real answer elsewhere. A descriptor path
  // (readShardDescriptorPath) is judged by the file it names.
  const statfsSync = ((path: string, options?: unknown) => {
    const target = String(path).startsWith('/proc/self/fd/') ? fs.realpathSync(String(path)) : String(path);
    // A process without /proc: its descriptor paths cannot be asked.
    if (target !== String(path) && [...fake.noProc].some((dir) => target.startsWith(dir))) throw Object.assign(new Error(`ENOENT: statfs '${String(path)}'`), { code: 'ENOENT' });
    if ([...fake.failing].some((dir) => target.startsWith(dir))) throw Object.assign(new Error(`ENOENT: statfs '${target}'`), { code: 'ENOENT' });
    if (fake.squashfsLowers.has(target)) return { ...fs.statfsSync('/'), type: 0x73717368 };
    if (fake.overlayLowers.has(target)) return { ...fs.statfsSync('/'), type: 0x794c7630 };
    const real = fs.statfsSync(path, options as never);
    if ([...fake.overlays].some((dir) => target.startsWith(dir))) return { ...real, type: 0x794c7630 };
    return [...fake.weak].some((dir) => target.startsWith(dir)) ? { ...real, type: 0x73717368 } : real;
  }) as typeof fs.statfsSync;
  const realpathSync = ((path: string, options?: unknown) => (isFake(String(path)) ? String(path) : fs.realpathSync(path, options as never))) as typeof fs.realpathSync;
  // This process's mounts as the test describes them.
  const readFileSync = ((path: unknown, options?: unknown) =>
    path === '/proc/self/mountinfo' ? fake.mountinfo : fs.readFileSync(path as never, options as never)) as typeof fs.readFileSync;
  return { ...fs, default: { ...fs, statfsSync, readFileSync, realpathSync }, statfsSync, readFileSync, realpathSync };
});

const { weakFileSystemName } = await import('../src/detect-weak-file-system.js');

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('weak-fs'));
});
afterAll(async () => {
  await cleanup?.();
});

const tensors = (seed = 0): FixtureTensor[] => tunedWeights(['a', 'b'], 31, seed);

describe('shards on a file system whose stamps prove nothing', () => {
  it('names the read-only image and FUSE file systems by their statfs magic, and no other', () => {
    expect(weakFileSystemName(0x73717368)).toBe('squashfs');
    expect(weakFileSystemName(0xe0f5e1e2)).toBe('erofs');
    expect(weakFileSystemName(0x9660)).toBe('iso9660');
    expect(weakFileSystemName(0x65735546)).toBe('fuse');
    expect(weakFileSystemName(0xef53)).toBeUndefined(); // ext4
    expect(weakFileSystemName(0x01021994)).toBeUndefined(); // tmpfs
    expect(weakFileSystemName(0x794c7630)).toBeUndefined(); // overlayfs
  });

  it('are checked at every load and never recorded; fileSources: trust serves them from the cache', async () => {
    const dir = join(root, 'image');
    const cacheDir = join(root, 'image-cache');
    const model = await writeModel(dir, tensors(), 1 << 20);
    await buildCache(model, cacheDir); // recorded with the file's stamp, as a build does
    await model.close();
    fake.weak.add(dir);
    const image = await openSafetensorsModel(dir);
    const truth = await readAllRaw(image);
    try {
      for (let round = 0; round < 2; round++) {
        const cache = await openShardCache(cacheDir);
        try {
          // Twice through one handle too: a check is not kept by the handle either.
          for (let again = 0; again < 2; again++) {
            const load = loadModel(image, cache);
            for await (const tensor of load) expect(sameBytes(tensor.data, truth.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
            for (const report of load.reports) {
              expect(report, `round ${round}, load ${again}`).toMatchObject({ source: 'raw', reason: 'unchecked' });
              expect(report.detail).toMatch(/it is on squashfs, whose file stamps cannot tell two images' files apart, so it is checked at every load/);
            }
          }
          expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 0, failed: 0 });
        } finally {
          await cache.close();
        }
      }
      const trusting = await openShardCache(cacheDir, { fileSources: 'trust' });
      try {
        expect((await loadTensor({ model: image, name: 'a.weight' }, { cache: trusting })).report).toMatchObject({ source: 'cache', reason: 'cached' });
      } finally {
        await trusting.close();
      }
    } finally {
      await image.close();
    }
  });

  it("another image's file of one layout (a fine-tune) is stale at every load, and never makes the base's own file raw", async () => {
    const baseDir = join(root, 'base-image');
    const tunedDir = join(root, 'tuned-image');
    const cacheDir = join(root, 'images-cache');
    const base = await writeModel(baseDir, tensors(), 1 << 20);
    await buildCache(base, cacheDir);
    await base.close();
    await (await writeModel(tunedDir, tensors(100), 1 << 20)).close();
    fake.weak.add(baseDir).add(tunedDir);
    const tuned = await openSafetensorsModel(tunedDir);
    const again = await openSafetensorsModel(baseDir);
    const cache = await openShardCache(cacheDir);
    try {
      for (let round = 0; round < 2; round++) {
        const loaded = await loadTensor({ model: tuned, name: 'b.weight' }, { cache });
        expect(loaded.report).toMatchObject({ source: 'raw', reason: 'stale' });
        expect(loaded.report.digestMs).toBeGreaterThan(0); // hashed each time: no mismatch is remembered by a stamp that names other files
        expect(sameBytes(loaded.data, tensors(100)[1]!.data)).toBe(true);
      }
      const own = await loadTensor({ model: again, name: 'b.weight' }, { cache });
      expect(own.report).toMatchObject({ source: 'raw', reason: 'unchecked' });
      expect(sameBytes(own.data, tensors()[1]!.data)).toBe(true);
    } finally {
      await cache.close();
      await tuned.close();
      await again.close();
    }
  });

  it('cacheOnly: NOT_CACHED at every load, naming the trust option and why it is rarely right; a shard whose path can no longer be statfs\'d (a link switched, a lazy unmount) is taken as weak', async () => {
    const dir = join(root, 'cache-only');
    const cacheDir = join(root, 'cache-only-cache');
    const model = await writeModel(dir, tensors(), 1 << 20);
    await buildCache(model, cacheDir);
    await model.close();
    fake.weak.add(dir);
    const image = await openSafetensorsModel(dir);
    const cache = await openShardCache(cacheDir);
    try {
      await loadModel(image, cache).drain(); // a load that reads raw: nothing recorded all the same
      await expect(loadTensor({ model: image, name: 'a.weight' }, { cache, cacheOnly: true })).rejects.toMatchObject({
        code: 'NOT_CACHED',
        details: { reason: 'unchecked' },
        message: expect.stringMatching(/whose file stamps prove nothing: .*fileSources: 'trust' would serve it unchecked, which is wrong wherever images of one layout take each other's place/),
      });
    } finally {
      await cache.close();
      await image.close();
    }
    const goneDir = join(root, 'statfs-fails');
    const goneCache = join(root, 'statfs-fails-cache');
    const gone = await writeModel(goneDir, tensors(), 1 << 20);
    await buildCache(gone, goneCache);
    fake.failing.add(goneDir);
    const handle = await openShardCache(goneCache);
    try {
      expect((await loadTensor({ model: gone, name: 'a.weight' }, { cache: handle })).report).toMatchObject({ source: 'raw', reason: 'unchecked' });
    } finally {
      await handle.close();
      await gone.close();
    }
  });

  it('an overlay whose lower layer is a squashfs image (Apptainer --overlay) is weak; one whose lower layers this process cannot see (a container\'s, on the host) is not', async () => {
    const image = join(root, 'overlay-image');
    const container = join(root, 'overlay-container');
    const cacheDir = join(root, 'overlay-cache');
    const model = await writeModel(image, tensors(), 1 << 20);
    await buildCache(model, cacheDir);
    await model.close();
    await (await writeModel(container, tensors(), 1 << 20)).close();
    fake.overlays.add(image).add(container);
    fake.squashfsLowers.add('/images/base,v1:layer'); // a comma and a colon in its name, as the kernel and overlay escape them
    // `<id> <parent> <dev> <root> <mount point> <options> <optional> - <type> <source> <super options>`
    fake.mountinfo = [
      '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
      `90 22 0:50 / ${image} rw,relatime - overlay overlay rw,lowerdir=/tmp/upper-note:/images/base\\054v1\\134:layer,upperdir=/u,workdir=/w`,
      `91 22 0:51 / ${container} rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/ABC:/var/lib/docker/overlay2/l/DEF,upperdir=/u2,workdir=/w2`,
    ].join('\n');
    const weakModel = await openSafetensorsModel(image);
    const plainModel = await openSafetensorsModel(container);
    const cache = await openShardCache(cacheDir);
    try {
      const weak = await loadTensor({ model: weakModel, name: 'a.weight' }, { cache });
      expect(weak.report).toMatchObject({ source: 'raw', reason: 'unchecked' });
      expect(weak.report.detail).toMatch(/it is on squashfs below an overlay, whose file stamps cannot tell/);
      // The container's copy is the same bytes: checked once (its own file), then recorded and trusted.
      expect((await loadTensor({ model: plainModel, name: 'a.weight' }, { cache })).report).toMatchObject({ source: 'raw', reason: 'unchecked' });
      await cache.flushObjectStamps!();
      expect((await loadTensor({ model: plainModel, name: 'a.weight' }, { cache })).report).toMatchObject({ source: 'cache', reason: 'cached' });
    } finally {
      await cache.close();
      await weakModel.close();
      await plainModel.close();
    }
  });

  it('overlays: the one on top where two share a mount point; an overlay below an overlay over an image; relative lower directories are not ours to resolve', async () => {
    const cases = { stacked: join(root, 'stacked'), nested: join(root, 'nested'), relative: join(root, 'relative') };
    const cacheDir = join(root, 'overlays-cache');
    const base = await writeModel(join(root, 'overlays-base'), tensors(), 1 << 20);
    await buildCache(base, cacheDir);
    await base.close();
    for (const dir of Object.values(cases)) {
      await (await writeModel(dir, tensors(), 1 << 20)).close();
      fake.overlays.add(dir);
    }
    fake.squashfsLowers.add('/img/deep');
    fake.overlayLowers.add('/ovl/mid');
    fake.mountinfo = [
      '22 1 8:1 / / rw - ext4 /dev/sda1 rw',
      // Two overlays on one mount point: the later is on top (its lower is an image).
      `100 22 0:60 / ${cases.stacked} rw - overlay overlay rw,lowerdir=/srv/plain,upperdir=/u,workdir=/w`,
      `101 100 0:61 / ${cases.stacked} rw - overlay overlay rw,lowerdir=/img/deep,upperdir=/u,workdir=/w`,
      // An overlay whose lower layer is an overlay over an image.
      `102 22 0:62 / ${cases.nested} rw - overlay overlay rw,lowerdir=/ovl/mid,upperdir=/u,workdir=/w`,
      '103 22 0:63 / /ovl/mid rw - overlay overlay rw,lowerdir=/img/deep,upperdir=/u,workdir=/w',
      // A lower directory named relative to the mounter's working directory: not resolved from ours.
      `104 22 0:64 / ${cases.relative} rw - overlay overlay rw,lowerdir=img/deep,upperdir=/u,workdir=/w`,
    ].join('\n');
    const cache = await openShardCache(cacheDir);
    try {
      for (const [label, dir] of Object.entries(cases)) {
        const model = await openSafetensorsModel(dir);
        try {
          const { report } = await loadTensor({ model, name: 'a.weight' }, { cache });
          if (label === 'relative') expect(report.detail ?? '', label).not.toMatch(/below an overlay/);
          else expect(report.detail, label).toMatch(/it is on squashfs below an overlay/);
        } finally {
          await model.close();
        }
      }
    } finally {
      await cache.close();
    }
  });

  it('without /proc (a descriptor path that cannot be asked) the shard\'s path is asked instead: an ordinary file stays trusted', async () => {
    const dir = join(root, 'no-proc');
    const cacheDir = join(root, 'no-proc-cache');
    const model = await writeModel(dir, tensors(), 1 << 20);
    await buildCache(model, cacheDir);
    fake.noProc.add(dir);
    const cache = await openShardCache(cacheDir);
    try {
      expect((await loadTensor({ model, name: 'a.weight' }, { cache })).report).toMatchObject({ source: 'cache', reason: 'cached' });
    } finally {
      await cache.close();
      await model.close();
    }
  });
});
