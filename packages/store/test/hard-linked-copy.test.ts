// A cache copied with hard links (`cp -al`, snapshot tools that link unchanged files) shares its
// journal file with the original. Blobs and manifests part by themselves (only ever replaced by a
// rename); the journal was appended in place, so each cache's writer wrote into the other's journal,
// and each cache read entries whose blobs were in the other directory. A writer now replaces a
// journal that has another name with its own copy before it appends anything.
import { link, mkdir, readdir, rmdir, stat } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { JournalFile } from '../src/backend.js';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import { openCacheStore } from '../src/index.js';
import { createRng, makeCache, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterAll(removeTempDirs);

/** `cp -al source target`: every file of the cache linked, not copied. */
async function linkCopy(source: string, target: string): Promise<void> {
  await mkdir(join(target, 'blobs'), { recursive: true });
  for (const name of await readdir(source)) {
    if (name === 'blobs') continue;
    await link(join(source, name), join(target, name));
  }
  for (const name of await readdir(join(source, 'blobs'))) await link(join(source, 'blobs', name), join(target, 'blobs', name));
}

async function journalOf(root: string): Promise<{ name: string; links: number; sizeBytes: number }> {
  const name = (await readdir(root)).find((n) => /^journal\.\d+$/.test(n))!;
  const info = await stat(join(root, name));
  return { name, links: info.nlink, sizeBytes: info.size };
}

describe('a hard-linked copy of a cache', () => {
  it("writes of either side stay its own: the other never sees its entries, both verify, and the copy's open readers follow its writes", async () => {
    const { root: original, tensors } = await makeCache(2);
    const copy = join(await makeTempDir(), 'copy');
    await linkCopy(original, copy);
    const before = await journalOf(original);
    expect(before.links).toBe(2);

    // A reader of the copy, opened while the journal is shared.
    const reader = await openCacheStore(copy);
    const added = makeTensor([32, 33], 91);
    const writer = await openCacheStore(copy);
    try {
      await writer.addEntry(toInput(added, 'copy.only', [['model.safetensors', 0, added.bytes.byteLength]]));
    } finally {
      await writer.close();
    }
    // The original's journal is as it was, and now its own; the copy has another.
    const after = await journalOf(original);
    expect(after).toEqual({ ...before, links: 1 });
    const fromOriginal = await openCacheStore(original);
    const fromCopy = await openCacheStore(copy);
    try {
      expect(fromOriginal.getEntry(added.key)).toBeUndefined();
      expect(fromOriginal.lookupBySlice('model.safetensors', 0, added.bytes.byteLength)).toBeUndefined();
      expect(fromCopy.getEntry(added.key)).toBeDefined();
      for (const tensor of tensors) {
        expect(fromOriginal.getEntry(tensor.key)).toBeDefined();
        expect(fromCopy.getEntry(tensor.key)).toBeDefined();
      }
      expect((await fromOriginal.verify()).ok).toBe(true);
      expect((await fromCopy.verify()).ok).toBe(true);
      // The reader that had the shared journal open sees the copy's write, not a stale view.
      await reader.refresh();
      expect(reader.getEntry(added.key)).toBeDefined();
    } finally {
      await fromOriginal.close();
      await fromCopy.close();
      await reader.close();
    }

    // The original's writes stay its own too.
    const second = makeTensor([16, 17], 92);
    const originalWriter = await openCacheStore(original);
    try {
      await originalWriter.addEntry(toInput(second, 'original.only'));
    } finally {
      await originalWriter.close();
    }
    const copyAgain = await openCacheStore(copy);
    try {
      expect(copyAgain.getEntry(second.key)).toBeUndefined();
      expect(copyAgain.getEntry(added.key)).toBeDefined();
      expect((await copyAgain.verify()).ok).toBe(true);
    } finally {
      await copyAgain.close();
    }
  });

  it('a writer of the original that wrote before the copy (its journal handle open) follows the privatized generation; a privatization that fails changes nothing and is done again', async () => {
    const { root: original } = await makeCache(1);
    const early = await openCacheStore(original);
    const x0 = makeTensor([8, 9], 93);
    await early.addEntry(toInput(x0, 'early.first')); // its journal write handle is open now
    const copy = join(await makeTempDir(), 'copy');
    await linkCopy(original, copy);
    const { name } = await journalOf(original);
    const next = `journal.${Number(name.split('.')[1]) + 1}`;

    // The copy's first write cannot make its next journal (a directory in the way): it fails, typed,
    // and neither cache changes.
    await mkdir(join(copy, next));
    const blocked = await openCacheStore(copy);
    const y0 = makeTensor([8, 10], 94);
    await expect(blocked.addEntry(toInput(y0, 'copy.blocked'))).rejects.toMatchObject({ code: expect.stringMatching(/^(JOURNAL_INVALID|IO_ERROR)$/) });
    await blocked.close().catch(() => undefined);
    expect((await journalOf(original)).links).toBe(2);
    await rmdir(join(copy, next));

    // The original's new writer privatizes; the early writer's next commit goes to the new generation.
    const writer = await openCacheStore(original);
    const x1 = makeTensor([8, 11], 95);
    await writer.addEntry(toInput(x1, 'original.second'));
    await writer.close();
    const x2 = makeTensor([8, 12], 96);
    await early.addEntry(toInput(x2, 'early.after'));
    await early.close();
    // The copy now writes (its journal is its own already: the original left it).
    const fromCopyWriter = await openCacheStore(copy);
    await fromCopyWriter.addEntry(toInput(y0, 'copy.after'));
    await fromCopyWriter.close();

    const a = await openCacheStore(original);
    const b = await openCacheStore(copy);
    try {
      for (const t of [x0, x1, x2]) expect(a.getEntry(t.key)).toBeDefined();
      expect(a.getEntry(y0.key)).toBeUndefined();
      expect(b.getEntry(x0.key)).toBeDefined(); // committed before the copy
      for (const t of [x1, x2]) expect(b.getEntry(t.key)).toBeUndefined();
      expect(b.getEntry(y0.key)).toBeDefined();
      expect((await a.verify()).ok).toBe(true);
      expect((await b.verify()).ok).toBe(true);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a copy's writer killed at any instant of its first commit: both caches open and verify, the original unchanged", async () => {
    const { root: original, tensors } = await makeCache(2);
    const before = await journalOf(original);
    const entry = JSON.stringify(fileURLToPath(new URL('../dist/index.js', import.meta.url)));
    const rng = createRng(20261205);
    for (let trial = 0; trial < 12; trial++) {
      const copy = join(await makeTempDir(), 'copy');
      await linkCopy(original, copy);
      const added = makeTensor([16, 16 + trial], 300 + trial);
      const script = `
        import { openCacheStore } from ${entry};
        const store = await openCacheStore(${JSON.stringify(copy)});
        process.stdout.write('open\\n');
        await store.addEntry({ key: ${JSON.stringify(added.key)}, qualname: 'copy.${trial}', payload: new Uint8Array(Buffer.from(${JSON.stringify(Buffer.from(added.payload).toString('base64'))}, 'base64')), shape: ${JSON.stringify(added.shape)}, dtype: 'BF16' });
        await store.close();
      `;
      const delayMs = Math.floor(rng() * 12);
      await new Promise<void>((resolve, reject) => {
        const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
        let timer: NodeJS.Timeout | undefined;
        child.stdout.on('data', () => (timer ??= setTimeout(() => child.kill('SIGKILL'), delayMs)));
        child.on('error', reject);
        child.on('exit', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      const b = await openCacheStore(copy);
      try {
        expect((await b.verify()).ok, `trial ${trial}`).toBe(true);
        for (const t of tensors) expect(b.getEntry(t.key), `trial ${trial}`).toBeDefined();
      } finally {
        await b.close();
      }
      const a = await openCacheStore(original);
      try {
        expect(a.getEntry(added.key), `trial ${trial}`).toBeUndefined();
        expect((await a.verify()).ok, `trial ${trial}`).toBe(true);
      } finally {
        await a.close();
      }
      expect((await journalOf(original)).sizeBytes, `trial ${trial}`).toBe(before.sizeBytes);
    }
  });

  it.each(['unlink', 'open'] as const)("a step after the new manifest that fails (%s of a journal) leaves the writer at the new generation: its next commits are where the manifest looks", async (step) => {
    const { root: original } = await makeCache(1);
    const copy = join(await makeTempDir(), 'copy');
    await linkCopy(original, copy);
    const { name } = await journalOf(copy);
    const generation = Number(name.split('.')[1]);
    let armed = true;
    let nextOpens = 0;
    class FailingOnce extends FsBackend {
      override async removeJournal(g: number): Promise<void> {
        if (step === 'unlink' && armed && g === generation) {
          armed = false;
          throw Object.assign(new Error('EIO: i/o error, unlink'), { code: 'EIO' });
        }
        return super.removeJournal(g);
      }
      override async openJournal(g: number): Promise<JournalFile | undefined> {
        // The second open of the next journal: the one after the new manifest (the first looks for a left-over one).
        if (step === 'open' && armed && g === generation + 1 && ++nextOpens === 2) {
          armed = false;
          throw Object.assign(new Error('EMFILE: too many open files, open'), { code: 'EMFILE' });
        }
        return super.openJournal(g);
      }
    }
    const writer = await FsCacheStore.load(new FailingOnce(copy), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false });
    const first = makeTensor([8, 20], 97);
    const second = makeTensor([8, 21], 98);
    const theirs = makeTensor([8, 22], 99);
    try {
      // The move itself may fail the first commit (a failed open); the one after must land.
      await writer.addEntry(toInput(first, 'copy.first')).catch(() => undefined);
      expect(armed).toBe(false);
      // Meanwhile the original commits: the old journal is its alone now (link count 1), and it
      // appends there.
      const other = await openCacheStore(original, { compactOnClose: false }); // a long-lived writer: no compaction (and no seal) yet
      await other.addEntry(toInput(theirs, 'original.meanwhile'));
      await other.close();
      expect((await writer.addEntry(toInput(second, 'copy.second'))).added).toBe(true);
      expect(writer.getEntry(theirs.key)).toBeUndefined();
    } finally {
      await writer.close();
    }
    const b = await openCacheStore(copy);
    const a = await openCacheStore(original);
    try {
      expect(b.getEntry(second.key)).toBeDefined();
      expect(b.getEntry(theirs.key)).toBeUndefined();
      expect(a.getEntry(theirs.key)).toBeDefined();
      expect(a.getEntry(second.key)).toBeUndefined();
      expect(a.getEntry(first.key)).toBeUndefined();
      expect((await b.verify()).ok).toBe(true);
      expect((await a.verify()).ok).toBe(true);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
