import { spawnSync } from 'node:child_process';
import { closeSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calibrateCodebook, encode } from '@splitzip/codec';
import type { OpenedPayloadFile, ReadDecodeRequest, ReadDecodeResult } from '../src/create-cpu-decoder.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
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

/** readDecode of `file` into fresh buffers (shared memory or not); the file is closed after. */
async function readDecodeFile(file: string, options: { shared: boolean; values?: number }) {
  const count = options.values ?? VALUE_COUNT;
  const payloadBytes = options.shared ? new Uint8Array(new SharedArrayBuffer(payload.length)) : new Uint8Array(payload.length);
  const out = options.shared ? new Uint16Array(new SharedArrayBuffer(2 * count)) : new Uint16Array(count);
  out.fill(0xaaaa);
  const fd = openSync(file, 'r');
  try {
    const running = decoder.readDecode({ values: count, open: async () => ({ fd, payload: payloadBytes, out }) });
    expect(running).toBeDefined();
    const result = (await running) as ReadDecodeResult;
    return { result, payloadBytes, out };
  } finally {
    closeSync(fd);
  }
}

describe('readDecode: a decode thread reads the blob and decodes it', () => {
  it('is bit-exact into shared memory and into ordinary arrays (through shared scratch)', async () => {
    const before = decoder.stats().threadReads;
    for (const shared of [true, false]) {
      const { result, payloadBytes, out } = await readDecodeFile(files.full, { shared });
      expect(out).toEqual(values);
      // The bytes read land in the caller's payload view, for the header checks after.
      expect(payloadBytes).toEqual(payload);
      expect(result.readMs).toBeGreaterThanOrEqual(0);
      expect(result.decodeMs).toBeGreaterThanOrEqual(0);
    }
    expect(decoder.stats().threadReads - before).toBe(2);
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
      const running = decoder.readDecode({ values: count, open: async () => ({ fd, payload: new Uint8Array(new SharedArrayBuffer(payload.length)), out }) });
      await expect(running).rejects.toMatchObject({ code: 'META_MISMATCH' });
    } finally {
      closeSync(fd);
    }
    expect(out.every((v) => v === 0xaaaa)).toBe(true);
  });

  it('an out that does not hold the tensor is INVALID_ARGUMENT', async () => {
    const running = decoder.readDecode({
      values: VALUE_COUNT,
      open: async () => ({ fd: -1, payload: new Uint8Array(payload.length), out: new Uint16Array(VALUE_COUNT - 1) }),
    });
    await expect(running).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('declines tensors below its inline bound without opening anything', async () => {
    const inline = createThreadDecoder({ threads: 1 }); // default bound: 2^21 values
    try {
      let opened = 0;
      const request: ReadDecodeRequest = {
        values: VALUE_COUNT,
        open: async () => {
          opened += 1;
          throw new Error('not to be called');
        },
      };
      expect(inline.readDecode(request)).toBeUndefined();
      expect(opened).toBe(0);
      expect(inline.stats().startedThreads).toBe(0);
    } finally {
      await inline.close();
    }
  });

  it('queued reads open nothing until a worker takes them: one file open per worker at a time', async () => {
    const one = createThreadDecoder({ threads: 1, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    const fds: number[] = [];
    try {
      let open = 0;
      let peakOpen = 0;
      const outs: Uint16Array[] = [];
      const runs = Array.from({ length: 6 }, () =>
        (one.readDecode({
          values: VALUE_COUNT,
          open: async (): Promise<OpenedPayloadFile> => {
            open += 1;
            peakOpen = Math.max(peakOpen, open);
            const out = new Uint16Array(new SharedArrayBuffer(2 * VALUE_COUNT));
            outs.push(out);
            fds.push(openSync(files.full, 'r'));
            return { fd: fds[fds.length - 1] as number, payload: new Uint8Array(new SharedArrayBuffer(payload.length)), out };
          },
        }) as Promise<unknown>).finally(() => {
          open -= 1;
        }),
      );
      await Promise.all(runs);
      expect(peakOpen).toBe(1);
      expect(outs).toHaveLength(6);
      for (const out of outs) expect(out).toEqual(values);
    } finally {
      for (const fd of fds) closeSync(fd);
      await one.close();
    }
  });

  it('a closed decoder refuses, and rejects the reads still queued', async () => {
    const closing = createThreadDecoder({ threads: 1, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    // The worker is still starting: the read waits in the queue.
    const queued = closing.readDecode({ values: VALUE_COUNT, open: async () => ({ fd: -1, payload: new Uint8Array(0), out: new Uint16Array(VALUE_COUNT) }) });
    const refused = expect(queued).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await closing.close();
    await refused;
    expect(() => closing.readDecode({ values: VALUE_COUNT, open: async () => ({ fd: -1, payload: new Uint8Array(0), out: new Uint16Array(VALUE_COUNT) }) })).toThrow(
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
