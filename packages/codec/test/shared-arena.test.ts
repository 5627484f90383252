// Shared codec arenas: other threads attach with their own scratch area and encode/decode the
// arena's views in place. Checked against the scalar reference, in this thread (an attached
// instance works at a non-zero scratch base) and in real worker threads (the built dist).
import { existsSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { CODEC_DIST_PATH, startArenaWorkers } from './arena-workers.js';
import {
  attachCodecArena,
  calibrateCodebook,
  createCodebook,
  createCodecArena,
  decode,
  encode,
  MAX_ARENA_THREADS,
  readPayloadMeta,
  setCodecBackend,
} from '../src/index.js';
import { codeOf } from './backends.js';
import { allBf16Patterns, gaussianBf16, referenceDecode, referenceEncode, valuesWithExponents } from './reference.js';

afterAll(() => setCodecBackend('auto'));

const sameValues = (a: ArrayLike<number>, b: ArrayLike<number>) => a.length === b.length && Array.prototype.every.call(a, (x, i) => x === b[i]);

/** Gaussian weights with escapes every 97th value; a 12-entry codebook (escape-heavy). */
function escapeHeavy(n: number, seed: number): { values: Uint16Array; exponents: readonly number[] } {
  const values = gaussianBf16(n, 0.02, seed);
  const extra = valuesWithExponents(n, [3, 200, 250], seed + 1);
  for (let i = 0; i < n; i += 97) values[i] = extra[i]!;
  return { values, exponents: calibrateCodebook(values).codebook.exponents.slice(0, 12) };
}

describe('shared codec arena', () => {
  it('reserves a scratch area per thread and validates its arguments', () => {
    const arena = createCodecArena(1 << 16, { threads: 2 });
    expect(arena.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(arena.threads).toBe(2);
    expect(createCodecArena(256).threads).toBe(0);
    const a = arena.share(0);
    const b = arena.share(1);
    expect(a.buffer).toBe(arena.buffer);
    expect(a.scratchBase).not.toBe(b.scratchBase);
    expect(codeOf(() => arena.share(2))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => arena.share(-1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => createCodecArena(1 << 16).share(0))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => createCodecArena(1 << 16, { threads: MAX_ARENA_THREADS + 1 }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => createCodecArena(1 << 16, { threads: 1.5 }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => attachCodecArena({ ...a, scratchBase: a.scratchBase + 16 }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => attachCodecArena({ ...a, scratchBase: 1 << 30 }))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => attachCodecArena({ buffer: new ArrayBuffer(8) as unknown as SharedArrayBuffer, memory: null, scratchBase: 0 }))).toBe(
      'INVALID_ARGUMENT',
    );
    // Allocations never reach into the reserved scratch areas: they start after the last one.
    const view = arena.allocate(256);
    expect(view.byteOffset).toBeGreaterThanOrEqual(b.scratchBase + (b.scratchBase - a.scratchBase));
  });

  it('an attached instance (non-zero scratch base) encodes and decodes in place exactly like the reference', () => {
    const arena = createCodecArena(8 << 20, { threads: 3 });
    // Attaching in this thread re-binds this buffer's kernels to thread 2's scratch area.
    expect(attachCodecArena(arena.share(2)).zeroCopy).toBe(true);
    const cases: { values: Uint16Array; exponents: readonly number[] }[] = [
      escapeHeavy(70001, 5),
      { values: allBf16Patterns(9), exponents: calibrateCodebook(allBf16Patterns(9)).codebook.exponents },
      // Exponents far apart: the encoder needs several swizzle windows.
      { values: valuesWithExponents(33333, [1, 40, 90, 130, 170, 254], 4), exponents: [1, 40, 90, 130, 170] },
      { values: new Uint16Array(0), exponents: [127] },
    ];
    for (const { values, exponents } of cases) {
      arena.reset();
      const input = arena.allocateValues(values.length);
      input.set(values);
      const expected = referenceEncode(values, exponents, 1024);
      const slot = arena.allocate(expected.length);
      const payload = encode(input, createCodebook(exponents), { out: slot });
      expect(sameValues(payload, expected)).toBe(true);
      const out = arena.allocateValues(values.length);
      decode(payload, out);
      expect(sameValues(out, values)).toBe(true);
      expect(sameValues(referenceDecode(payload), values)).toBe(true);
    }
  });

  it('worker threads decode chunk ranges and encode in place in one shared arena (built dist)', async () => {
    expect(existsSync(CODEC_DIST_PATH), `${CODEC_DIST_PATH} is missing: build the package first`).toBe(true);
    const chunkJob = `
      const payload = new Uint8Array(arena.buffer, job.payloadAt, job.payloadBytes);
      if (job.kind === 'decode') {
        const meta = codec.readPayloadMeta(payload);
        const start = job.firstChunk * meta.chunkSize;
        const count = Math.min(meta.elementCount, (job.firstChunk + job.chunkCount) * meta.chunkSize) - start;
        codec.decodeChunks(payload, meta, job.firstChunk, job.chunkCount, new Uint16Array(arena.buffer, job.outAt + 2 * start, count));
        return { ok: true };
      }
      const values = new Uint16Array(arena.buffer, job.valuesAt, job.count);
      const written = codec.encode(values, codec.createCodebook(job.exponents), { out: payload });
      return { ok: true, bytes: written.length, at: written.byteOffset };`;
    const arena = createCodecArena(16 << 20, { threads: 2 });
    const { workers, ask, attach, terminate } = startArenaWorkers(chunkJob, arena, 2);
    try {
      expect(await attach()).toEqual([true, true]);
      const { values, exponents } = escapeHeavy(300001, 21);
      const input = arena.allocateValues(values.length);
      input.set(values);
      const expected = referenceEncode(values, exponents, 1024);
      const payload = encode(input, createCodebook(exponents), { out: arena.allocate(expected.length) });
      const meta = readPayloadMeta(payload);
      const out = arena.allocateValues(values.length);
      // Decode: the two workers take one half of the chunks each, at once.
      const half = Math.floor(meta.chunkCount / 2);
      const base = { kind: 'decode', payloadAt: payload.byteOffset, payloadBytes: payload.length, outAt: out.byteOffset };
      const decoded = await Promise.all([
        ask(workers[0]!, { ...base, firstChunk: 0, chunkCount: half }),
        ask(workers[1]!, { ...base, firstChunk: half, chunkCount: meta.chunkCount - half }),
      ]);
      expect(decoded).toEqual([{ ok: true }, { ok: true }]);
      expect(sameValues(out, values)).toBe(true);
      // Encode in place on both workers at once, into two slots.
      const slots = [arena.allocate(expected.length), arena.allocate(expected.length)];
      const encoded = await Promise.all(
        workers.map((worker, i) =>
          ask(worker, { kind: 'encode', valuesAt: input.byteOffset, count: values.length, exponents, payloadAt: slots[i]!.byteOffset, payloadBytes: expected.length }),
        ),
      );
      for (const [i, reply] of encoded.entries()) {
        expect(reply.ok, String(reply.message)).toBe(true);
        expect(sameValues(slots[i]!.subarray(0, reply.bytes as number), expected)).toBe(true);
      }
    } finally {
      await terminate();
    }
  });
});
