import { spawnSync } from 'node:child_process';
import { closeSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calibrateCodebook, encode, readPayloadMeta } from '@splitzip/codec';
import type { OpenedPayloadFile, ReadDecodeRequest, ReadDecodeResult, ReadDecodeStaging, StagingLease } from '../src/create-cpu-decoder.js';
import { createThreadDecoder, type ThreadDecoder } from '../src/create-thread-decoder.js';
import { RuntimeError } from '../src/errors.js';
import { bf16Weights, makeTempDir } from './fixtures.js';

// The thread decoder's readDecode on files written here: a worker reads the payload from the file
// descriptor it is handed and decodes it with its checksum verified. The loader's use of it (the
// store's checks around it, bad blobs served raw) is in failures.test.ts.

const VALUE_COUNT = 3001; // not a multiple of 2, 4 or the chunk size
const raw = bf16Weights(VALUE_COUNT, 21);
const values = new Uint16Array(raw.buffer, raw.byteOffset, VALUE_COUNT);
const payload = encode(values, calibrateCodebook(values).codebook);

let dir: string;
let cleanup: () => Promise<void>;
const files: Record<'full' | 'short' | 'flipped', string> = { full: '', short: '', flipped: '' };
// Every tensor through the workers (no inline bound), two of them.
const decoder = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });

beforeAll(async () => {
  ({ dir, cleanup } = await makeTempDir('thread-reads'));
  files.full = join(dir, 'full.bin');
  writeFileSync(files.full, payload);
  files.short = join(dir, 'short.bin');
  writeFileSync(files.short, payload.subarray(0, payload.length - 100));
  const flipped = payload.slice();
  const at = Math.floor(flipped.length * 0.6);
  flipped[at] = (flipped[at] as number) ^ 0x04;
  files.flipped = join(dir, 'flipped.bin');
  writeFileSync(files.flipped, flipped);
});
afterAll(async () => {
  await decoder.close();
  await cleanup?.();
});

/**
 * A staging source of fresh slots (shared memory or not) that counts what is out: every slot a
 * worker takes must come back once it has nothing left to read.
 */
function createStaging(shared: boolean, slotBytes = payload.length): ReadDecodeStaging & { out: number; taken: number; slots: Uint8Array[] } {
  const staging = {
    source: {},
    out: 0,
    taken: 0,
    slots: [] as Uint8Array[],
    take(): StagingLease {
      staging.out += 1;
      staging.taken += 1;
      const bytes = shared ? new Uint8Array(new SharedArrayBuffer(slotBytes)) : new Uint8Array(slotBytes);
      staging.slots.push(bytes);
      let held = true;
      return {
        bytes,
        arena: undefined,
        release: () => {
          if (!held) throw new Error('released twice');
          held = false;
          staging.out -= 1;
        },
      };
    },
  };
  return staging;
}

/** Resolves once `check()` holds (slots come back a moment after the last answer is handled). */
async function eventually(check: () => boolean): Promise<void> {
  for (let k = 0; k < 200 && !check(); k++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(check()).toBe(true);
}

/** readDecode of `file` into a fresh output (shared memory or not); the file is closed after. */
async function readDecodeFile(file: string, options: { shared: boolean; values?: number; check?: OpenedPayloadFile['check']; using?: ThreadDecoder }) {
  const count = options.values ?? VALUE_COUNT;
  const out = options.shared ? new Uint16Array(new SharedArrayBuffer(2 * count)) : new Uint16Array(count);
  out.fill(0xaaaa);
  const staging = createStaging(options.shared);
  const fd = openSync(file, 'r');
  try {
    const running = (options.using ?? decoder).readDecode({
      values: count,
      staging,
      open: (slot) => ({ fd, payload: slot.bytes.subarray(0, payload.length), out, check: options.check }),
    });
    expect(running).toBeDefined();
    const result = (await running) as ReadDecodeResult;
    return { result, out, staging };
  } finally {
    closeSync(fd);
    await eventually(() => staging.out === 0);
  }
}

/** The manifest fields of `payload`, as the store keeps them, for the thread's header check. */
function entryOf(bytes: Uint8Array, edit: (entry: { meta: { escapeCount: number }; codebook: { exponents: number[] } }) => void = () => undefined) {
  const meta = readPayloadMeta(bytes);
  const entry = {
    key: 'k'.repeat(40),
    qualname: 'layer.weight',
    compBytes: meta.compBytes,
    rawBytes: meta.rawBytes,
    meta: { version: meta.version, elementCount: meta.elementCount, chunkSize: meta.chunkSize, chunkCount: meta.chunkCount, escapeCount: meta.escapeCount, checksum: meta.checksum },
    codebook: { exponents: [...meta.codebook.exponents] },
  };
  edit(entry);
  return entry as unknown as NonNullable<OpenedPayloadFile['check']>['entry'];
}

describe('readDecode: a decode thread reads the blob and decodes it', () => {
  it('is bit-exact into shared memory and into ordinary arrays (through shared scratch)', async () => {
    const before = decoder.stats().threadReads;
    for (const shared of [true, false]) {
      const { result, out, staging } = await readDecodeFile(files.full, { shared });
      expect(out).toEqual(values);
      // A shared slot is read into in place; an ordinary one through scratch.
      if (shared) expect((staging.slots[0] as Uint8Array).subarray(0, payload.length)).toEqual(payload);
      expect(staging.taken).toBe(1);
      expect(result.readMs).toBeGreaterThanOrEqual(0);
      expect(result.decodeMs).toBeGreaterThanOrEqual(0);
    }
    expect(decoder.stats().threadReads - before).toBe(2);
  });

  it('without an out, the worker allocates the values in an ArrayBuffer of their own and hands it over', async () => {
    const staging = createStaging(true);
    const fd = openSync(files.full, 'r');
    try {
      const result = (await decoder.readDecode({ values: VALUE_COUNT, staging, open: (slot) => ({ fd, payload: slot.bytes.subarray(0, payload.length) }) })) as ReadDecodeResult;
      expect(result.values).toBeInstanceOf(Uint16Array);
      expect(result.values?.buffer).toBeInstanceOf(ArrayBuffer);
      expect(result.values?.byteOffset).toBe(0);
      expect(result.values).toEqual(values);
      // A damaged payload hands nothing over.
      const flippedFd = openSync(files.flipped, 'r');
      try {
        await expect(decoder.readDecode({ values: VALUE_COUNT, staging, open: (slot) => ({ fd: flippedFd, payload: slot.bytes.subarray(0, payload.length) }) })).rejects.toMatchObject({
          code: 'CACHE_READ_FAILED',
        });
      } finally {
        closeSync(flippedFd);
      }
    } finally {
      closeSync(fd);
      await eventually(() => staging.out === 0);
    }
  });

  it('decodeToNew: a worker decodes a payload into a buffer it allocates (verified or not); the caller decodes small ones', async () => {
    const meta = readPayloadMeta(payload);
    for (const verifyChecksum of [true, false]) {
      for (const shared of [true, false]) {
        const bytes = shared ? new Uint8Array(new SharedArrayBuffer(payload.length)) : new Uint8Array(payload.length);
        bytes.set(payload);
        const decoded = await decoder.decodeToNew?.(bytes, meta, { verifyChecksum });
        expect(decoded?.values.buffer).toBeInstanceOf(ArrayBuffer);
        expect(decoded?.values).toEqual(values);
      }
    }
    const flipped = payload.slice();
    flipped[Math.floor(flipped.length * 0.6)]! ^= 0x04;
    await expect(decoder.decodeToNew?.(flipped, meta, { verifyChecksum: true })).rejects.toMatchObject({ code: 'CACHE_READ_FAILED' });
    const inline = createThreadDecoder({ threads: 1 }); // default bound: 2^21 values
    try {
      expect(inline.decodeToNew?.(payload, meta)).toBeUndefined();
      expect(inline.stats().startedThreads).toBe(0);
    } finally {
      await inline.close();
    }
  });

  it('checks the header against the manifest entry on the thread, before decoding', async () => {
    const agreeing = await readDecodeFile(files.full, { shared: true, check: { entry: entryOf(payload), blobPath: files.full } });
    expect(agreeing.out).toEqual(values);
    const cases: [string, Parameters<typeof entryOf>[1]][] = [
      ['escapeCount', (entry) => void (entry.meta.escapeCount += 1)],
      ['codebook', (entry) => void entry.codebook.exponents.reverse()],
    ];
    for (const [field, edit] of cases) {
      let out: Uint16Array | undefined;
      const failing = readDecodeFile(files.full, { shared: true, check: { entry: entryOf(payload, edit), blobPath: files.full } }).then((r) => (out = r.out));
      const error = await failing.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RuntimeError);
      expect(error).toMatchObject({ code: 'CACHE_ENTRY_MISMATCH', details: { blob: files.full } });
      expect((error as Error).message).toContain(field);
      expect(out).toBeUndefined();
    }
  });

  it('a file that ends before the payload does is BLOB_SIZE_MISMATCH', async () => {
    await expect(readDecodeFile(files.short, { shared: true })).rejects.toMatchObject({ code: 'BLOB_SIZE_MISMATCH' });
  });

  it('a flipped byte fails the checksum: CACHE_READ_FAILED', async () => {
    await expect(readDecodeFile(files.flipped, { shared: true })).rejects.toMatchObject({ code: 'CACHE_READ_FAILED' });
  });

  it('a payload of another value count is refused before anything is written', async () => {
    const count = VALUE_COUNT + 1;
    const out = new Uint16Array(new SharedArrayBuffer(2 * count)).fill(0xaaaa);
    const fd = openSync(files.full, 'r');
    try {
      const running = decoder.readDecode({ values: count, staging: createStaging(true), open: (slot) => ({ fd, payload: slot.bytes.subarray(0, payload.length), out }) });
      await expect(running).rejects.toMatchObject({ code: 'META_MISMATCH' });
    } finally {
      closeSync(fd);
    }
    expect(out.every((v) => v === 0xaaaa)).toBe(true);
  });

  it('an out that does not hold the tensor is INVALID_ARGUMENT', async () => {
    const running = decoder.readDecode({
      values: VALUE_COUNT,
      staging: createStaging(false),
      open: () => ({ fd: -1, payload: new Uint8Array(payload.length), out: new Uint16Array(VALUE_COUNT - 1) }),
    });
    await expect(running).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('declines tensors below its inline bound without opening anything', async () => {
    const inline = createThreadDecoder({ threads: 1 }); // default bound: 2^21 values
    try {
      let opened = 0;
      const staging = createStaging(true);
      const request: ReadDecodeRequest = {
        values: VALUE_COUNT,
        staging,
        open: () => {
          opened += 1;
          throw new Error('not to be called');
        },
      };
      expect(inline.readDecode(request)).toBeUndefined();
      expect(opened).toBe(0);
      expect(staging.taken).toBe(0);
      expect(inline.stats().startedThreads).toBe(0);
    } finally {
      await inline.close();
    }
  });

  it('each worker keeps one slot for its reads, holds at most readJobsPerWorker files open, and gives the slot back when done', async () => {
    for (const readJobsPerWorker of [1, 2, 3]) {
      const two = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0, readJobsPerWorker });
      const fds: number[] = [];
      try {
        await two.warmUp();
        let open = 0;
        let peakOpen = 0;
        const outs: Uint16Array[] = [];
        const staging = createStaging(true);
        const runs = Array.from({ length: 12 }, () =>
          (two.readDecode({
            values: VALUE_COUNT,
            staging,
            open: (slot): OpenedPayloadFile => {
              open += 1;
              peakOpen = Math.max(peakOpen, open);
              const out = new Uint16Array(new SharedArrayBuffer(2 * VALUE_COUNT));
              outs.push(out);
              fds.push(openSync(files.full, 'r'));
              return { fd: fds[fds.length - 1] as number, payload: slot.bytes.subarray(0, payload.length), out };
            },
          }) as Promise<unknown>).finally(() => {
            open -= 1;
          }),
        );
        await Promise.all(runs);
        // Files open = jobs handed out and not yet settled here: a worker's next job is handed out
        // as its answer arrives, a moment before that answer settles, hence the one extra per worker.
        expect(peakOpen).toBeLessThanOrEqual(2 * (readJobsPerWorker + 1));
        expect(peakOpen).toBeGreaterThanOrEqual(2);
        // One slot per worker, however many tensors: twelve reads, at most two slots taken.
        expect(staging.taken).toBeLessThanOrEqual(2);
        expect(outs).toHaveLength(12);
        for (const out of outs) expect(out).toEqual(values);
        await eventually(() => staging.out === 0);
      } finally {
        for (const fd of fds) closeSync(fd);
        await two.close();
      }
    }
  });

  it('a slot that cannot be taken fails the reads waiting for it; an open that throws fails only its own', async () => {
    const one = createThreadDecoder({ threads: 1, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    try {
      await one.warmUp();
      const refusing: ReadDecodeStaging = { source: {}, take: () => Promise.reject(Object.assign(new Error('pool closed'), { code: 'POOL_CLOSED' })) };
      const request = { values: VALUE_COUNT, staging: refusing, open: (): OpenedPayloadFile => expect.unreachable('opened without a slot') };
      await Promise.all([
        expect(one.readDecode(request)).rejects.toMatchObject({ code: 'POOL_CLOSED' }),
        expect(one.readDecode(request)).rejects.toMatchObject({ code: 'POOL_CLOSED' }),
      ]);
      const staging = createStaging(true);
      const fd = openSync(files.full, 'r');
      try {
        const out = new Uint16Array(new SharedArrayBuffer(2 * VALUE_COUNT));
        const failing = one.readDecode({
          values: VALUE_COUNT,
          staging,
          open: () => {
            throw Object.assign(new Error('blob is a symlink'), { code: 'CACHE_READ_FAILED' });
          },
        });
        const fine = one.readDecode({ values: VALUE_COUNT, staging, open: (slot) => ({ fd, payload: slot.bytes.subarray(0, payload.length), out }) });
        await expect(failing).rejects.toMatchObject({ code: 'CACHE_READ_FAILED' });
        await fine;
        expect(out).toEqual(values);
      } finally {
        closeSync(fd);
      }
      await eventually(() => staging.out === 0);
    } finally {
      await one.close();
    }
  });

  it('a read whose signal aborts while it waits is rejected with ABORTED and leaves the queue; the others go on', async () => {
    const one = createThreadDecoder({ threads: 1, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    try {
      await one.warmUp();
      // A staging source whose one slot is held elsewhere: reads wait for it.
      let giveSlot: ((lease: StagingLease) => void) | undefined;
      const waiting: ReadDecodeStaging = { source: {}, take: () => new Promise<StagingLease>((resolve) => (giveSlot = resolve)) };
      const controller = new AbortController();
      let opened = 0;
      const aborted = one.readDecode({
        values: VALUE_COUNT,
        staging: waiting,
        signal: controller.signal,
        open: () => {
          opened += 1;
          throw new Error('not to be opened');
        },
      });
      const already = new AbortController();
      already.abort('gone');
      await expect(one.readDecode({ values: VALUE_COUNT, staging: waiting, signal: already.signal, open: () => expect.unreachable() })).rejects.toMatchObject({ code: 'ABORTED' });
      controller.abort('load cancelled');
      await expect(aborted).rejects.toMatchObject({ code: 'ABORTED', details: { reason: 'load cancelled' } });
      expect(opened).toBe(0);
      // The slot that comes later is given back at once: nothing waits for it any more.
      let released = 0;
      giveSlot?.({ bytes: new Uint8Array(new SharedArrayBuffer(payload.length)), arena: undefined, release: () => void (released += 1) });
      await eventually(() => released === 1);
      // Other reads still work.
      const { out } = await readDecodeFile(files.full, { shared: true, using: one });
      expect(out).toEqual(values);
    } finally {
      await one.close();
    }
  });

  it('a closed decoder refuses, and rejects the reads still queued', async () => {
    const closing = createThreadDecoder({ threads: 1, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    // The worker is still starting: the read waits in the queue.
    const staging = createStaging(true);
    const queued = closing.readDecode({ values: VALUE_COUNT, staging, open: () => ({ fd: -1, payload: new Uint8Array(0), out: new Uint16Array(VALUE_COUNT) }) });
    const refused = expect(queued).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await closing.close();
    await refused;
    expect(staging.out).toBe(0);
    expect(() => closing.readDecode({ values: VALUE_COUNT, staging, open: () => ({ fd: -1, payload: new Uint8Array(0), out: new Uint16Array(VALUE_COUNT) }) })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });
});

describe('warmUp', () => {
  it("keeps a script alive until the workers answer (a top-level await with nothing else running)", () => {
    // The built package, as a user's script imports it.
    const entry = new URL('../dist/index.js', import.meta.url).href;
    const script = `import { createThreadDecoder } from ${JSON.stringify(entry)};
const decoder = createThreadDecoder({ threads: 2 });
await decoder.warmUp();
console.log('ready', decoder.stats().readyThreads);
await decoder.close();`;
    // A file, not --eval: the workers inherit the process's flags, and --input-type would stop them.
    const file = join(dir, 'warm-up.mjs');
    writeFileSync(file, script);
    const run = spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 60_000 });
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('ready 2');
    expect(run.status).toBe(0);
  });
});
