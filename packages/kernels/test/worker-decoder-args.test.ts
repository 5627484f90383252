import { calibrateCodebook, createCodecArena, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createChecksumWorker } from '../src/create-checksum-worker.js';
import { createKernels, createWorkerDecoder } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);

const values = modelLikeValues(300_007, 4);
const payload = codecEncode(values, calibrateCodebook(values).codebook);

describe('worker decoder: out overlapping the payload', () => {
  it('rejects INVALID_ARGUMENT naming out, before any worker starts', { timeout: 15_000 }, async () => {
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 0, arenaBytes: 4 << 20 });
    try {
      const region = d.allocatePayload(2 * values.length);
      region.set(payload);
      const pay = region.subarray(0, payload.length);
      const out = new Uint16Array(region.buffer, region.byteOffset, values.length);
      // The codec's error, as every Kernels backend throws it for the same mistake (it was a KernelsError here).
      await expect(d.decode(pay, out, { verify: false })).rejects.toMatchObject({
        name: 'SplitZipError',
        code: 'INVALID_ARGUMENT',
        message: 'INVALID_ARGUMENT: out overlaps the payload',
        details: { argument: 'out' },
      });
      const kernels = await createKernels({ backend: 'codec' });
      await expect(kernels.decode(pay, out, { verify: false })).rejects.toMatchObject({
        name: 'SplitZipError',
        code: 'INVALID_ARGUMENT',
        message: 'INVALID_ARGUMENT: out overlaps the payload',
        details: { argument: 'out' },
      });
      await kernels.dispose();
      // The decoder still works afterwards.
      const good = await d.decode(pay, d.allocateOutput(values.length));
      expect(Array.from(good)).toEqual(Array.from(values));
    } finally {
      await d.dispose();
    }
  });
});

describe('worker decoder: out over the payload through a second SharedArrayBuffer object', () => {
  it('is INVALID_ARGUMENT (a buffer posted twice, or structuredClone, is one memory under two objects)', { timeout: 15_000 }, async () => {
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 0 });
    try {
      const sab = new SharedArrayBuffer(payload.length + 2 * values.length);
      const pay = new Uint8Array(sab, 0, payload.length);
      pay.set(payload);
      const out = new Uint16Array(structuredClone(sab), 256, values.length);
      await expect(d.decode(pay, out, { verify: false })).rejects.toMatchObject({ name: 'SplitZipError', code: 'INVALID_ARGUMENT', details: { argument: 'out' } });
      expect(Array.from(pay)).toEqual(Array.from(payload));
      // Another memory at the same offsets decodes.
      const apart = new Uint16Array(new SharedArrayBuffer(sab.byteLength), 256, values.length);
      expect(Array.from(await d.decode(pay, apart))).toEqual(Array.from(values));
    } finally {
      await d.dispose();
    }
  });
});

describe('worker decoder: null and unchecked options are INVALID_ARGUMENT', () => {
  const invalid = (argument: string) => expect.objectContaining({ code: 'INVALID_ARGUMENT', details: expect.objectContaining({ argument }) });

  it('createWorkerDecoder(null), arena null, minParallelElements -1 / "x", callerDecodes "no"', () => {
    const bad: [unknown, string][] = [
      [null, 'options'],
      [{ threads: 1, arena: null }, 'arena'],
      [{ threads: 1, minParallelElements: -1 }, 'minParallelElements'],
      [{ threads: 1, minParallelElements: 'x' }, 'minParallelElements'],
      [{ threads: 1, callerDecodes: 'no' }, 'callerDecodes'],
    ];
    for (const [options, argument] of bad) {
      expect(() => createWorkerDecoder(options as never)).toThrow(invalid(argument));
    }
  });

  it('decode(payload, null) is INVALID_ARGUMENT, not a TypeError', async () => {
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 0 });
    try {
      await expect(d.decode(payload, null as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await d.dispose();
    }
  });
});

// The user probe: `threads: null` took the default thread count, a misspelt key was ignored, and
// `{ verfy: false }` or `{ verify: 'false' }` verified; all quietly.
describe('worker decoder: unknown keys, null and wrong kinds are INVALID_ARGUMENT naming the option', () => {
  const named = (argument: string, suggestion?: string) =>
    expect.objectContaining({
      code: 'INVALID_ARGUMENT',
      details: expect.objectContaining({ argument, ...(suggestion === undefined ? {} : { suggestion }) }),
      ...(suggestion === undefined ? {} : { message: expect.stringContaining(`did you mean "${suggestion}"?`) }),
    });

  it.each([
    [{ threads: null }, 'threads'],
    [{ thread: 2 }, 'thread', 'threads'],
    [{ threads: 1, minParallelElements: null }, 'minParallelElements'],
    [{ threads: 1, minParalellElements: 0 }, 'minParalellElements', 'minParallelElements'],
    [{ threads: 1, callerDecodes: null }, 'callerDecodes'],
    [{ threads: 1, splitChecksum: null }, 'splitChecksum'],
    [{ threads: 1, arenaBytes: null }, 'arenaBytes'],
    [{ threads: 1, arenaBytes: 1.5 }, 'arenaBytes'],
    [{ threads: 1, workerUrl: 42 }, 'workerUrl'],
    [{ threads: 1, workerURL: 'x.js' }, 'workerURL', 'workerUrl'],
  ])('createWorkerDecoder(%o)', (options, argument, suggestion?: string) => {
    expect(() => createWorkerDecoder(options as never)).toThrow(named(argument, suggestion));
  });

  it('threads: null says so in the message; known keys set to undefined are the defaults', async () => {
    expect(() => createWorkerDecoder({ threads: null } as never)).toThrow('threads must be an integer in 1..32, got null');
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: undefined, callerDecodes: undefined, splitChecksum: undefined, arena: undefined, arenaBytes: undefined });
    await d.dispose();
  });

  it('decode and verifyChecksum refuse unknown keys, verify given as a string, and null options', async () => {
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 0 });
    try {
      await expect(d.decode(payload, undefined, { verfy: false } as never)).rejects.toEqual(named('verfy', 'verify'));
      await expect(d.decode(payload, undefined, { verify: 'false' } as never)).rejects.toEqual(named('verify'));
      await expect(d.decode(payload, undefined, null as never)).rejects.toEqual(named('options'));
      const shared = new Uint8Array(new SharedArrayBuffer(payload.length));
      shared.set(payload);
      await expect(d.verifyChecksum(shared, { gates: new Int32Array(new SharedArrayBuffer(4)) } as never)).rejects.toEqual(named('gates', 'gate'));
      // Still works afterwards.
      expect(Array.from(await d.decode(payload, undefined, { verify: false }))).toEqual(Array.from(values));
    } finally {
      await d.dispose();
    }
  });
});

// The user probe: a workerUrl that Node's Worker refuses (a 'file:' URL as a string, a bare file
// name, an https: URL) was taken, and `new Worker` then threw out of every parallel decode an
// untyped TypeError (ERR_WORKER_PATH, ERR_INVALID_URL_SCHEME), with callerDecodes too.
describe('worker decoder: a workerUrl Node cannot start is INVALID_ARGUMENT up front', () => {
  const fileHref = new URL('../dist/decode-worker.js', import.meta.url).href;
  it.each([
    [fileHref, /as a string is a path, not a URL: pass new URL\(\.\.\.\)/],
    ['decode-worker.js', /must be an absolute path or one starting with \.\/ or \.\.\//],
    ['data:text/javascript,1', /pass new URL/],
    [new URL('https://example.com/decode-worker.js'), /must be a file: or data: URL \(a Worker loads no https: script\)/],
  ])('createWorkerDecoder({ workerUrl: %s }) and createChecksumWorker', (url, message) => {
    const expected = expect.objectContaining({ name: 'KernelsError', code: 'INVALID_ARGUMENT', message: expect.stringMatching(message), details: expect.objectContaining({ argument: 'workerUrl', value: String(url) }) });
    expect(() => createWorkerDecoder({ threads: 1, workerUrl: url })).toThrow(expected);
    expect(() => createChecksumWorker({ threads: 1, workerUrl: url })).toThrow(expected);
  });

  // The README says a bad workerUrl is refused at creation; one naming no file was taken, every
  // worker died at start, and the calling thread decoded alone (createWorkerPoolDecoder in a bundle).
  it.each([
    [new URL('file:///nonexistent/splitzip-decode-worker.js'), /names no file that can be read \(ENOENT: \/nonexistent\/splitzip-decode-worker\.js\)/],
    ['/nonexistent/splitzip-decode-worker.js', /names no file that can be read \(ENOENT/],
    ['./nonexistent/splitzip-decode-worker.js', /names no file that can be read \(ENOENT/],
    [new URL('../dist/', import.meta.url), /names something that is not a file/],
  ])('createWorkerDecoder({ workerUrl: %s }) naming no script file, and createChecksumWorker', (url, message) => {
    const expected = expect.objectContaining({ name: 'KernelsError', code: 'INVALID_ARGUMENT', message: expect.stringMatching(message), details: expect.objectContaining({ argument: 'workerUrl', value: String(url) }) });
    expect(() => createWorkerDecoder({ threads: 1, workerUrl: url })).toThrow(expected);
    expect(() => createChecksumWorker({ threads: 1, workerUrl: url })).toThrow(expected);
  });

  it('takes an absolute path, a ./ relative one and a file: URL, and decodes with them', async () => {
    const fromCwd = relative(process.cwd(), fileURLToPath(workerUrl));
    const dotted = fromCwd.startsWith('..') ? fromCwd : `./${fromCwd}`;
    for (const url of [fileURLToPath(workerUrl), dotted, workerUrl]) {
      const d = createWorkerDecoder({ threads: 1, workerUrl: url, minParallelElements: 0, callerDecodes: false });
      try {
        const shared = new Uint8Array(new SharedArrayBuffer(payload.length));
        shared.set(payload);
        expect(Array.from(await d.decode(shared))).toEqual(Array.from(values));
      } finally {
        await d.dispose();
      }
    }
  });
});

// A relative path was checked from the working directory at creation but given to Worker as it was,
// and workers start lazily: after a process.chdir every worker died at start (workerDeaths only).
describe('worker decoder: a relative workerUrl is resolved at creation', () => {
  it('decodes with workers after a process.chdir between creation and the first decode', async () => {
    const cwd = process.cwd();
    const fromCwd = relative(cwd, fileURLToPath(workerUrl));
    const dotted = fromCwd.startsWith('..') ? fromCwd : `./${fromCwd}`;
    const elsewhere = mkdtempSync(join(tmpdir(), 'splitzip-chdir-'));
    const d = createWorkerDecoder({ threads: 1, workerUrl: dotted, minParallelElements: 0, callerDecodes: false });
    try {
      process.chdir(elsewhere);
      const shared = new Uint8Array(new SharedArrayBuffer(payload.length));
      shared.set(payload);
      expect(Array.from(await d.decode(shared))).toEqual(Array.from(values));
      expect(d.workerDeaths).toBe(0);
    } finally {
      process.chdir(cwd);
      await d.dispose();
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });
});

// INVALID_ARGUMENT names the argument on every path (these had empty details).
describe('worker decoder: every INVALID_ARGUMENT names its argument', () => {
  const named = (argument: string) => expect.objectContaining({ code: 'INVALID_ARGUMENT', details: expect.objectContaining({ argument }) });

  it('out of the wrong kind, payload of the wrong kind, arena and arenaBytes both, an ordinary payload to verifyChecksum, a bad gate, no arena', async () => {
    expect(() => createWorkerDecoder({ threads: 1, workerUrl, arena: createCodecArena(1 << 16, { threads: 1 }), arenaBytes: 1 << 16 })).toThrow(named('arena'));
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 0 });
    try {
      await expect(d.decode(payload, [] as never)).rejects.toEqual(named('out'));
      await expect(d.decode(new Uint16Array(8) as never)).rejects.toEqual(named('payload'));
      await expect(d.verifyChecksum(payload)).rejects.toEqual(named('payload'));
      await expect(d.verifyChecksum({} as never)).rejects.toEqual(named('payload'));
      const shared = new Uint8Array(new SharedArrayBuffer(payload.length));
      shared.set(payload);
      await expect(d.verifyChecksum(shared, { gate: new Int32Array(1) })).rejects.toEqual(named('gate'));
      expect(() => d.allocateOutput(4)).toThrow(named('arena'));
    } finally {
      await d.dispose();
    }
  });

  it('createChecksumWorker: a thread count out of range, an arena that is not shared', () => {
    expect(() => createChecksumWorker({ threads: 0 })).toThrow(named('webgpu.checksumThreads'));
    expect(() => createChecksumWorker({ arena: { buffer: new ArrayBuffer(8) } as never })).toThrow(named('webgpu.arena'));
  });
});
