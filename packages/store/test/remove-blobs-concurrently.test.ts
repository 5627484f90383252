// A directory cache's dropUnboundEntries and gc unlink their files a few at once (MAX_CONCURRENT_UNLINKS,
// remove-files-limited.ts): removals overlap, never more than the limit; their reports keep the
// order a loop gave whatever order the unlinks end in; a drop tries every blob and reports those
// that failed in the entries' order; gc throws the error of the first file in its order that
// failed, every file before it removed. A backend hook holds each unlink's end and lets the
// latest started end first.
import { existsSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { ListedFile } from '../src/backend.js';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import { openCacheStore } from '../src/index.js';
import { MAX_CONCURRENT_UNLINKS } from '../src/limits.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00001.safetensors';
const SETTINGS = { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false };
/** More than the limit: a removal starts as one ends. */
const FILE_COUNT = MAX_CONCURRENT_UNLINKS + 8;

/**
 * A backend whose removals (done, or failed for the names in `failing`) end only when the hook
 * lets them (those in `unheld` at once): the latest started first, one each turn of the event
 * loop, so removals running together end in the reverse of their start order. Records starts,
 * ends and the most in flight.
 */
function createHeldUnlinkBackend(root: string, failing: ReadonlySet<string>, unheld: ReadonlySet<string> = new Set()) {
  const seen = { started: [] as string[], ended: [] as string[], inFlight: 0, mostInFlight: 0 };
  const held: (() => void)[] = [];
  let releasing = false;
  const release = (): void => {
    if (releasing) return;
    releasing = true;
    setImmediate(function next(): void {
      const end = held.pop();
      if (end === undefined) {
        releasing = false;
        return;
      }
      end();
      setImmediate(next);
    });
  };
  class HeldUnlinks extends FsBackend {
    override async removeFile(file: ListedFile): Promise<void> {
      seen.started.push(file.name);
      seen.inFlight++;
      seen.mostInFlight = Math.max(seen.mostInFlight, seen.inFlight);
      let error: Error | undefined;
      if (failing.has(file.name)) error = Object.assign(new Error(`EACCES: ${file.name} (a test fault)`), { code: 'EACCES' });
      else await super.removeFile(file);
      if (!unheld.has(file.name)) {
        await new Promise<void>((resolve) => {
          held.push(resolve);
          release();
        });
      }
      seen.inFlight--;
      seen.ended.push(file.name);
      if (error !== undefined) throw error;
    }
  }
  return { backend: new HeldUnlinks(root), seen };
}

it('a drop unlinks its blobs a few at once (at most MAX_CONCURRENT_UNLINKS), tries every one, and reports entries and blobsLeft in the order a loop did, whatever order the unlinks end in', async () => {
  const root = await makeTempDir();
  const tensors = Array.from({ length: FILE_COUNT + 2 }, (_, i) => makeTensor([8, 6], 900 + i));
  const store = await openCacheStore(root, { create: true, compactOnClose: false });
  await store.addEntries(tensors.map((t, i) => toInput(t, `t${i}`, i < 2 ? [[SHARD, i * 96, 96]] : undefined)));
  await store.close();
  const unbound = tensors.slice(2);
  // Two early in the order and one late: each ends at another moment than its turn.
  const failing = [unbound[1]!, unbound[4]!, unbound[FILE_COUNT - 2]!];
  const { backend, seen } = createHeldUnlinkBackend(root, new Set(failing.map((t) => `${t.key}.bin`)));
  const writer = await FsCacheStore.load(backend, SETTINGS);
  const dry = await writer.dropUnboundEntries({ dryRun: true });
  const report = await writer.dropUnboundEntries();
  await writer.close();
  expect(seen.mostInFlight).toBeGreaterThan(1);
  expect(seen.mostInFlight).toBeLessThanOrEqual(MAX_CONCURRENT_UNLINKS);
  // The unlinks ended out of their start order (the hook's), and every blob was tried.
  expect(seen.ended).not.toEqual(seen.started);
  expect([...seen.started].sort()).toEqual(unbound.map((t) => `${t.key}.bin`).sort());
  // The report a loop gave: the entries in the state's order, blobsLeft in that order too.
  expect(report.entries).toEqual(dry.entries);
  expect(report.entries.map((e) => e.qualname)).toEqual(unbound.map((_, i) => `t${i + 2}`));
  expect(seen.started).toEqual(report.entries.map((e) => `${e.key}.bin`));
  expect(report.blobsLeft).toEqual(failing.map((t) => `blobs/${t.key}.bin`));
  for (const t of unbound) expect(existsSync(join(root, 'blobs', `${t.key}.bin`)), t.key).toBe(failing.includes(t));
  for (const t of tensors.slice(0, 2)) expect(existsSync(join(root, 'blobs', `${t.key}.bin`))).toBe(true);
});

/** A cache of one entry beside FILE_COUNT orphan blobs (names no entry has). */
async function cacheWithOrphans(): Promise<{ root: string; orphans: string[] }> {
  const root = await makeTempDir();
  const store = await openCacheStore(root, { create: true, compactOnClose: false });
  await store.addEntries([toInput(makeTensor([8, 6], 950), 'kept', [[SHARD, 0, 96]])]);
  await store.close();
  await mkdir(join(root, 'blobs'), { recursive: true });
  const orphans = Array.from({ length: FILE_COUNT }, (_, i) => `${i.toString(16).padStart(2, '0').repeat(20)}.bin`);
  for (const name of orphans) await writeFile(join(root, 'blobs', name), Buffer.alloc(10 + orphans.indexOf(name)));
  return { root, orphans };
}

it("gc unlinks orphans a few at once (at most MAX_CONCURRENT_UNLINKS) and reports them in its listing's order, whatever order the unlinks end in", async () => {
  const { root, orphans } = await cacheWithOrphans();
  const { backend, seen } = createHeldUnlinkBackend(root, new Set());
  const store = await FsCacheStore.load(backend, SETTINGS);
  const dry = await store.gc({ dryRun: true });
  const report = await store.gc();
  await store.close();
  expect(seen.mostInFlight).toBeGreaterThan(1);
  expect(seen.mostInFlight).toBeLessThanOrEqual(MAX_CONCURRENT_UNLINKS);
  expect(seen.ended).not.toEqual(seen.started);
  expect(report.orphanBlobs).toEqual(dry.orphanBlobs);
  expect([...report.orphanBlobs].sort()).toEqual(orphans.map((name) => `blobs/${name}`));
  // Started in the report's (the listing's) order.
  expect(seen.started.map((name) => `blobs/${name}`)).toEqual(report.orphanBlobs);
  expect(report.orphanBytes).toBe(orphans.reduce((sum, _, i) => sum + 10 + i, 0));
  const left = (await readdir(join(root, 'blobs'))).filter((name) => orphans.includes(name));
  expect(left).toEqual([]);
});

it('gc whose unlinks fail throws the error of the first in its order (as a loop did), every file before it removed, none started after a failure, though a later one failed first', async () => {
  const { root, orphans } = await cacheWithOrphans();
  // The listing's order, from a dry run: gc removes in it.
  const look = await openCacheStore(root, { compactOnClose: false });
  const listed = (await look.gc({ dryRun: true })).orphanBlobs.map((path) => path.slice('blobs/'.length));
  await look.close();
  expect([...listed].sort()).toEqual(orphans);
  const first = listed[2]!;
  const later = listed[6]!;
  // The later one fails at once, while the first is held.
  const { backend, seen } = createHeldUnlinkBackend(root, new Set([first, later]), new Set([later]));
  const store = await FsCacheStore.load(backend, SETTINGS);
  const error = await catchError(() => store.gc());
  await store.close();
  expect(seen.mostInFlight).toBeGreaterThan(1);
  expect(seen.ended.indexOf(later)).toBeLessThan(seen.ended.indexOf(first));
  expect(error.message).toBe(`EACCES: ${first} (a test fault)`);
  for (const name of listed.slice(0, 2)) expect(existsSync(join(root, 'blobs', name)), name).toBe(false);
  expect(existsSync(join(root, 'blobs', first))).toBe(true);
  expect(existsSync(join(root, 'blobs', later))).toBe(true);
  // Only those running when the first failure came were tried; those after are left for the next gc.
  expect(seen.started.length).toBeLessThanOrEqual(MAX_CONCURRENT_UNLINKS);
  expect(seen.started).toEqual(listed.slice(0, seen.started.length));
  const left = (await readdir(join(root, 'blobs'))).filter((name) => orphans.includes(name));
  expect(left).toEqual(expect.arrayContaining([first, later, ...listed.slice(MAX_CONCURRENT_UNLINKS)]));
  const again = await openCacheStore(root, { compactOnClose: false });
  expect([...(await again.gc()).orphanBlobs].sort()).toEqual(left.map((name) => `blobs/${name}`).sort());
  await again.close();
  expect((await readdir(join(root, 'blobs'))).filter((name) => orphans.includes(name))).toEqual([]);
});
