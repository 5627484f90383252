import { readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { createPacedReader } from '../src/create-paced-reader.js';
import { Worker } from 'node:worker_threads';
import { TIMER_THREAD_SOURCE, waitUntil } from '../src/wait-until.js';

let dir: string;
let file: string;
const content = new Uint8Array(3 * 1024 * 1024 + 17);
for (let i = 0; i < content.length; i += 1) content[i] = (i * 31 + (i >>> 11)) & 0xff;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'runtime-readers-'));
  file = join(dir, 'data.bin');
  await writeFile(file, content);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe.each([
  ['default (small reads synchronous)', undefined],
  ['never synchronous', 0],
  ['always synchronous', Number.POSITIVE_INFINITY],
] as const)('createFileReader, %s', (_label, syncReadMaxBytes) => {
  const makeReader = (options: { maxIdleHandles?: number } = {}) => createFileReader({ ...options, syncReadMaxBytes });

  it('reads exact ranges, concurrently, through shared handles', async () => {
    const reader = makeReader();
    const ranges = [
      [0, 100],
      [5, 1],
      [1024 * 1024 - 3, 2 * 1024 * 1024],
      [content.length - 17, 17],
      [12345, 0],
    ] as const;
    const targets = ranges.map(([, length]) => new Uint8Array(length));
    await Promise.all(ranges.map(([offset], i) => reader.readExact(file, targets[i]!, offset)));
    ranges.forEach(([offset, length], i) => {
      expect(Buffer.from(targets[i]!).equals(Buffer.from(content.subarray(offset, offset + length)))).toBe(true);
    });
    await reader.close();
  });

  it('fails with UNEXPECTED_EOF past the end and with the fs error for a missing file', async () => {
    const reader = makeReader();
    await expect(reader.readExact(file, new Uint8Array(10), content.length - 5)).rejects.toMatchObject({ code: 'UNEXPECTED_EOF' });
    await expect(reader.readExact(join(dir, 'nope.bin'), new Uint8Array(1), 0)).rejects.toMatchObject({ code: 'ENOENT' });
    // A failed open is not cached: the file appearing later is read.
    const late = join(dir, `late-${String(syncReadMaxBytes)}.bin`);
    await expect(reader.readExact(late, new Uint8Array(1), 0)).rejects.toMatchObject({ code: 'ENOENT' });
    await writeFile(late, Uint8Array.of(42));
    const one = new Uint8Array(1);
    await reader.readExact(late, one, 0);
    expect(one[0]).toBe(42);
    await reader.close();
    await expect(reader.readExact(file, new Uint8Array(1), 0)).rejects.toMatchObject({ code: 'READER_CLOSED' });
  });

  it('keeps at most maxIdleHandles idle files open and still reads every file', async () => {
    const reader = makeReader({ maxIdleHandles: 2 });
    const files = await Promise.all(
      [0, 1, 2, 3, 4].map(async (i) => {
        const path = join(dir, `small-${i}.bin`);
        await writeFile(path, Uint8Array.of(i, i + 1));
        return path;
      }),
    );
    for (let round = 0; round < 3; round += 1) {
      for (const [i, path] of files.entries()) {
        const two = new Uint8Array(2);
        await reader.readExact(path, two, 0);
        expect([...two]).toEqual([i, i + 1]);
      }
    }
    await reader.close();
  });
});

describe('createFileReader, synchronous and thread-pool reads together', () => {
  it('serves a small read while the file is still being opened for a large one, and closes every file it opened', async () => {
    const openFds = () => readdirSync('/proc/self/fd').length;
    const before = openFds();
    const reader = createFileReader({ syncReadMaxBytes: 1024 });
    const large = new Uint8Array(2 * 1024 * 1024);
    const small = new Uint8Array(100);
    // The large read opens the file on the thread pool; the small one finds that open in flight.
    await Promise.all([reader.readExact(file, large, 17), reader.readExact(file, small, 5000)]);
    expect(Buffer.from(large).equals(Buffer.from(content.subarray(17, 17 + large.length)))).toBe(true);
    expect(Buffer.from(small).equals(Buffer.from(content.subarray(5000, 5100)))).toBe(true);
    // A small read of a file not yet open opens it synchronously.
    const other = join(dir, 'other.bin');
    await writeFile(other, Uint8Array.of(7, 8, 9));
    const three = new Uint8Array(3);
    await reader.readExact(other, three, 0);
    expect([...three]).toEqual([7, 8, 9]);
    expect(openFds()).toBe(before + 2);
    await reader.close();
    expect(openFds()).toBe(before);
  });

  it('close waits for the reads in flight before closing their files', async () => {
    const openFds = () => readdirSync('/proc/self/fd').length;
    const before = openFds();
    const reader = createFileReader({ syncReadMaxBytes: 0 });
    const large = new Uint8Array(3 * 1024 * 1024);
    const reading = reader.readExact(file, large, 10);
    const closing = reader.close();
    await reading;
    await closing;
    expect(Buffer.from(large).equals(Buffer.from(content.subarray(10, 10 + large.length)))).toBe(true);
    expect(openFds()).toBe(before);
  });

  it('rejects bad options', () => {
    expect(() => createFileReader({ syncReadMaxBytes: -1 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => createFileReader({ maxIdleHandles: 1.5 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('createPacedReader', () => {
  function countingReader(inner: ByteReader) {
    const sizes: number[] = [];
    const reader: ByteReader = {
      async readExact(path, target, position) {
        sizes.push(target.byteLength);
        await inner.readExact(path, target, position);
      },
      close: () => inner.close(),
    };
    return { reader, sizes };
  }

  it('returns the same bytes as the inner reader, in pieces of at most chunkBytes', async () => {
    const { reader: inner, sizes } = countingReader(createFileReader());
    const paced = createPacedReader(inner, { bytesPerSecond: 1e12, chunkBytes: 256 * 1024 });
    const target = new Uint8Array(content.length - 1000);
    await paced.readExact(file, target, 1000);
    expect(Buffer.from(target).equals(Buffer.from(content.subarray(1000)))).toBe(true);
    expect(Math.max(...sizes)).toBe(256 * 1024);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(target.length);
    expect(paced.grantedBytes).toBe(target.length);
    await paced.close();
  });

  it('never delivers faster than rate × time + burst, across concurrent reads', async () => {
    // 8 MiB/s with a 256 KiB bucket: 3 MiB in 4 concurrent reads must take ≥ (3 MiB − 256 KiB) / rate.
    const bytesPerSecond = 8 * 1024 * 1024;
    const burstBytes = 256 * 1024;
    const paced = createPacedReader(createFileReader(), { bytesPerSecond, burstBytes, chunkBytes: 64 * 1024 });
    const total = 3 * 1024 * 1024;
    const quarter = total / 4;
    const start = performance.now();
    const targets = [0, 1, 2, 3].map(() => new Uint8Array(quarter));
    await Promise.all(targets.map((target, i) => paced.readExact(file, target, i * quarter)));
    const elapsedS = (performance.now() - start) / 1000;
    expect(elapsedS).toBeGreaterThanOrEqual((total - burstBytes) / bytesPerSecond - 0.002);
    targets.forEach((target, i) => {
      expect(Buffer.from(target).equals(Buffer.from(content.subarray(i * quarter, (i + 1) * quarter)))).toBe(true);
    });
    expect(paced.waitedMs).toBeGreaterThan(0);
    await paced.close();
  });

  it('with burstBytes 0 lets no byte through before the link has delivered it', async () => {
    // 3 MiB at 32 MiB/s in 256 KiB pieces: the read settles no earlier than 3 MiB / rate after it was asked.
    const bytesPerSecond = 32 * 1024 * 1024;
    const paced = createPacedReader(createFileReader(), { bytesPerSecond, burstBytes: 0, chunkBytes: 256 * 1024 });
    const target = new Uint8Array(3 * 1024 * 1024);
    const start = performance.now();
    await paced.readExact(file, target, 0);
    const elapsedMs = performance.now() - start;
    expect(Buffer.from(target).equals(Buffer.from(content.subarray(0, target.length)))).toBe(true);
    expect(elapsedMs).toBeGreaterThanOrEqual((target.length / bytesPerSecond) * 1000);
    expect(paced.linkFreeAtMs).toBeGreaterThanOrEqual(start + (target.length / bytesPerSecond) * 1000);
    expect(performance.now()).toBeGreaterThanOrEqual(paced.linkFreeAtMs);
    expect(paced.idleMs).toBe(0); // one read, its pieces back to back
    await paced.close();
  });

  it('settles no read before the link has delivered its last byte, also reads shorter than a millisecond of link', async () => {
    // 64 MiB/s in 16 KiB pieces, no burst: one piece is 0.24 ms of link, under a timer's millisecond.
    const bytesPerSecond = 64 * 1024 * 1024;
    const paced = createPacedReader(createFileReader(), { bytesPerSecond, burstBytes: 0, chunkBytes: 16 * 1024 });
    const sizes = [1, 4096, 16 * 1024, 16 * 1024 + 1, 40_000, 200_000, 7, 100_000, 3 * 16 * 1024, 2];
    // One after another: each settles once the link is free again (nothing else is on it).
    for (const size of sizes) {
      const target = new Uint8Array(size);
      await paced.readExact(file, target, 1000);
      expect(performance.now()).toBeGreaterThanOrEqual(paced.linkFreeAtMs);
      expect(Buffer.from(target).equals(Buffer.from(content.subarray(1000, 1000 + size)))).toBe(true);
    }
    // All at once, in two waves: the bytes handed out by any instant never pass rate × the time since the first ask.
    const firstAskMs = performance.now();
    const settled: { atMs: number; bytes: number }[] = [];
    const readAll = () =>
      Promise.all(
        sizes.map(async (size, i) => {
          await paced.readExact(file, new Uint8Array(size), i * 1000);
          settled.push({ atMs: performance.now(), bytes: size });
        }),
      );
    await Promise.all([readAll(), waitUntil(firstAskMs + 1.5).then(readAll)]);
    let handedBytes = 0;
    for (const { atMs, bytes } of settled.sort((a, b) => a.atMs - b.atMs)) {
      handedBytes += bytes;
      expect(handedBytes).toBeLessThanOrEqual(((atMs - firstAskMs) / 1000) * bytesPerSecond);
    }
    expect(performance.now()).toBeGreaterThanOrEqual(paced.linkFreeAtMs);
    await paced.close();
  });

  it('copies each piece from the inner reader as soon as the link starts delivering it', async () => {
    const { reader: inner, sizes } = countingReader(createFileReader());
    // 256 KiB at 1 MiB/s: a quarter of a second of link, one piece.
    const paced = createPacedReader(inner, { bytesPerSecond: 1024 * 1024, burstBytes: 0 });
    const target = new Uint8Array(256 * 1024);
    // Let the event loop turn first: a read checks for a due turn before each piece, and the work
    // of the tests before this one (no turn between tests) could make one due on a loaded machine
    // (a clean-clone CI run asked the inner reader only after the turn, and this failed).
    await new Promise((resolve) => setImmediate(resolve));
    const reading = paced.readExact(file, target, 0);
    expect(sizes).toEqual([256 * 1024]); // asked of the inner reader at once, not once delivered
    await reading;
    expect(performance.now()).toBeGreaterThanOrEqual(paced.linkFreeAtMs);
    expect(Buffer.from(target).equals(Buffer.from(content.subarray(0, target.length)))).toBe(true);
    await paced.close();
  });

  it('counts the time the link sat idle between reads, not before the first', async () => {
    const paced = createPacedReader(createFileReader(), { bytesPerSecond: 1e9, burstBytes: 0 });
    await paced.readExact(file, new Uint8Array(1000), 0);
    expect(paced.idleMs).toBe(0);
    const deliveredMs = paced.linkFreeAtMs;
    await new Promise((resolve) => setTimeout(resolve, 30));
    const askedMs = performance.now();
    await paced.readExact(file, new Uint8Array(1000), 0);
    const answeredMs = performance.now();
    // The reader notes the ask a moment after this test does (on a loaded machine, up to a
    // millisecond or more): idle time lies between the two clocks' readings, never outside.
    expect(paced.idleMs).toBeGreaterThanOrEqual(askedMs - deliveredMs - 0.01);
    expect(paced.idleMs).toBeLessThanOrEqual(answeredMs - deliveredMs);
    expect(paced.idleMs).toBeGreaterThanOrEqual(25);
    await paced.close();
  });

  it('an aborted read takes no tokens for pieces it does not read: the link is left as it was for the reads sharing it', async () => {
    const chunkBytes = 64 * 1024;
    const base = createFileReader();
    const controller = new AbortController();
    let pieces = 0;
    let linkFreeAtFirstPieceMs = -1;
    const inner: ByteReader = {
      async readExact(path, target, position) {
        pieces += 1;
        linkFreeAtFirstPieceMs = paced.linkFreeAtMs;
        controller.abort(new Error('stop')); // during the first piece: the read stops after it
        await base.readExact(path, target, position);
      },
      close: () => base.close(),
    };
    const paced = createPacedReader(inner, { bytesPerSecond: 1e12, chunkBytes });
    try {
      // Aborted before it starts: nothing granted, the link's schedule untouched.
      await expect(paced.readExact(file, new Uint8Array(4 * chunkBytes), 0, { signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'ABORTED' });
      expect(pieces).toBe(0);
      expect(paced.grantedBytes).toBe(0);
      expect(paced.linkFreeAtMs).toBe(0);
      // Aborted during its first piece: that piece (read) is charged, the three it does not read are not.
      await expect(paced.readExact(file, new Uint8Array(4 * chunkBytes), 0, { signal: controller.signal })).rejects.toMatchObject({ code: 'ABORTED' });
      expect(pieces).toBe(1);
      expect(paced.grantedBytes).toBe(chunkBytes);
      expect(paced.linkFreeAtMs).toBe(linkFreeAtFirstPieceMs);
    } finally {
      await paced.close();
    }
  });

  it('rejects bad options', () => {
    const inner = createFileReader();
    expect(() => createPacedReader(inner, { bytesPerSecond: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => createPacedReader(inner, { bytesPerSecond: 1e9, chunkBytes: 1024, burstBytes: -1 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => createPacedReader(inner, { bytesPerSecond: 1e9, chunkBytes: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('waitUntil', () => {
  it('resolves no earlier than its deadline, for deadlines past, under a timer tick and over it', async () => {
    for (const aheadMs of [-5, 0, 0.05, 0.3, 0.9, 1, 1.7, 2.2, 3.5]) {
      const deadlineMs = performance.now() + aheadMs;
      await waitUntil(deadlineMs);
      expect(performance.now()).toBeGreaterThanOrEqual(deadlineMs);
    }
    // Concurrent waits, each to its own deadline.
    const base = performance.now();
    const deadlines = [2.5, 0.2, 1.1, 0.6, 3];
    const ended = await Promise.all(deadlines.map((d) => waitUntil(base + d).then(() => performance.now())));
    ended.forEach((atMs, i) => expect(atMs).toBeGreaterThanOrEqual(base + (deadlines[i] as number)));
  });

  it("its thread answers a deadline handed over right after 'ready', even when preempted in between", async () => {
    // The thread's own source, with a 100 ms stall injected just after it posts 'ready' (what a
    // preemption there does on a busy machine), driven the way waitUntil drives it: the first
    // deadline is handed over as soon as 'ready' arrives. A thread that read its hand-over counter
    // only after saying ready counted that hand-over as already seen and never answered (CI hangs).
    const stall = `const wt0 = require('node:worker_threads');
const post0 = wt0.parentPort.postMessage.bind(wt0.parentPort);
wt0.parentPort.postMessage = (m) => { post0(m); if (m === 'ready') { const t = Date.now(); while (Date.now() - t < 100) {} } };
`;
    const shared = new SharedArrayBuffer(16);
    const control = new Int32Array(shared, 0, 1);
    const delay = new Float64Array(shared, 8, 1);
    const worker = new Worker(stall + TIMER_THREAD_SOURCE, { eval: true, workerData: shared });
    try {
      const answered = await new Promise<boolean>((resolve, reject) => {
        const giveUp = setTimeout(() => resolve(false), 3000);
        worker.on('error', reject);
        worker.on('message', (message: unknown) => {
          if (message === 'ready') {
            delay[0] = 5;
            Atomics.add(control, 0, 1);
            Atomics.notify(control, 0);
          } else {
            clearTimeout(giveUp);
            resolve(true);
          }
        });
      });
      expect(answered).toBe(true);
    } finally {
      await worker.terminate();
    }
  });
});
