// One share of a shared arena, used by two threads: their kernels would share one scratch area
// (tables, digest lanes, block buffers), which returned wrong values without an error, or blamed
// good data with CHECKSUM_MISMATCH. Now a call that finds the share busy, or an attachment the
// owner retired with share(i), is refused (INVALID_ARGUMENT); sequential use stays right, and a
// replacement thread (share(i) again) works even where its predecessor died inside a call.
import { existsSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { CODEC_DIST_PATH, startArenaWorkers } from './arena-workers.js';
import { attachCodecArena, calibrateCodebook, createCodebook, createCodecArena, decode, encode, setCodecBackend, type CodecArena } from '../src/index.js';
import { gaussianBf16, valuesWithExponents } from './reference.js';

afterAll(() => setCodecBackend('auto'));

const sameValues = (a: ArrayLike<number>, b: ArrayLike<number>) => a.length === b.length && Array.prototype.every.call(a, (x, i) => x === b[i]);

/** The lock word of share `index` (arena-share-lock.ts's layout), as a thread inside a call holds it. */
const holdShare = (arena: CodecArena, index: number) => Atomics.store(new Int32Array(arena.buffer), 512 + 4 * (index + 1), 12345);

/** Decodes the payload at job.payloadAt into a fresh array `job.reps` times; counts wrong results and errors by message. */
const decodeJob = `
  const payload = new Uint8Array(arena.buffer, job.payloadAt, job.payloadBytes);
  let wrong = 0; const errors = [];
  for (let rep = 0; rep < (job.reps ?? 1); rep++) {
    const out = new Uint16Array(job.expected.length);
    try { codec.decode(payload, out); } catch (error) { errors.push(String(error.message)); continue; }
    for (let i = 0; i < out.length; i++) if (out[i] !== job.expected[i]) { wrong++; break; }
  }
  return { ok: true, wrong, errors };`;

/** Two payloads with different codebooks (a thread's cached decode tables are wrong for the other). */
function placePayloads(arena: CodecArena, n: number): { payloadAt: number; payloadBytes: number; expected: Uint16Array }[] {
  return [
    { values: gaussianBf16(n, 0.02, 3), exponents: null },
    { values: valuesWithExponents(n, [1, 40, 90, 130, 170], 4), exponents: [1, 40, 90, 130, 170] },
  ].map(({ values, exponents }) => {
    const payload = encode(values, exponents === null ? calibrateCodebook(values).codebook : createCodebook(exponents));
    const slot = arena.allocate(payload.length);
    slot.set(payload);
    return { payloadAt: slot.byteOffset, payloadBytes: payload.length, expected: values };
  });
}

describe('one share of a shared arena in two threads', () => {
  it('a call on a share another thread is inside is refused; share(i) again frees it for a replacement', () => {
    const arena = createCodecArena(1 << 20, { threads: 2 });
    const values = gaussianBf16(5000, 0.02, 1);
    const slot = arena.allocate(encode(values, calibrateCodebook(values).codebook).length);
    const payload = encode(values, calibrateCodebook(values).codebook, { out: slot });
    const share = arena.share(1);
    expect(attachCodecArena(share).zeroCopy).toBe(true);
    // A thread inside a kernel call on share 1 (or one killed there, which never released it).
    holdShare(arena, 1);
    const out = new Uint16Array(values.length);
    expect(() => decode(payload, out)).toThrow(/INVALID_ARGUMENT: share 1 of this arena is in use by another thread: attach each share in one thread only/);
    // The owner hands share 1 to a replacement thread (after the old one exited): it works.
    attachCodecArena(arena.share(1));
    decode(payload, out);
    expect(sameValues(out, values)).toBe(true);
  });

  it('worker threads: a retired share is refused, one share used in turn by two threads decodes right, at once never wrong (built dist)', async () => {
    expect(existsSync(CODEC_DIST_PATH), `${CODEC_DIST_PATH} is missing: build the package first`).toBe(true);
    const arena = createCodecArena(32 << 20, { threads: 2 });
    const [small, other] = placePayloads(arena, 100_000);
    const { workers, ask, terminate } = startArenaWorkers(decodeJob, arena, 2);
    try {
      // Share 0 handed out twice (the probe's misuse): the first attachment is retired.
      expect(await ask(workers[0]!, { share: arena.share(0) })).toEqual({ zeroCopy: true });
      expect(await ask(workers[1]!, { share: arena.share(0) })).toEqual({ zeroCopy: true });
      const retired = await ask(workers[0]!, small!);
      expect(retired.errors).toEqual([expect.stringMatching(/^INVALID_ARGUMENT: share 0 of this arena was handed out again/)]);
      expect(await ask(workers[1]!, small!)).toEqual({ ok: true, wrong: 0, errors: [] });

      // One share object in both workers, used in turn with two codebooks: each thread's cached
      // tables are reloaded after the other used the scratch area.
      const share = arena.share(1);
      for (const worker of workers) expect(await ask(worker, { share })).toEqual({ zeroCopy: true });
      for (const [worker, job] of [[0, small], [1, other], [0, small], [1, small], [0, other]] as const) {
        expect(await ask(workers[worker]!, job!)).toEqual({ ok: true, wrong: 0, errors: [] });
      }

      // At once, large payloads: a call is right or refused, never wrong.
      arena.reset();
      const [large] = placePayloads(arena, 1 << 22);
      const replies = await Promise.all(workers.map((worker) => ask(worker, { ...large!, reps: 8 })));
      for (const reply of replies) {
        expect(reply.wrong).toBe(0);
        for (const message of reply.errors as string[]) expect(message).toMatch(/^INVALID_ARGUMENT: share 1 of this arena is in use by another thread/);
      }
    } finally {
      await terminate();
    }
  }, 60_000);
});

// Two pools using one arena in turn (the runtime's idle staging arena under two thread decoders):
// with share(i) alone each took the share from the other's worker, which then failed for good.
describe('shareFor: hand a share out again only when another holder took it since', () => {
  it('null for the holder it was last handed to; a fresh share after another holder or a plain share()', () => {
    const arena = createCodecArena(1 << 20, { threads: 2 });
    const [a, b] = [{}, {}];
    const first = arena.shareFor(0, a)!;
    expect(first).toMatchObject({ generation: 1 });
    expect(arena.shareFor(0, a)).toBeNull();
    expect(arena.shareFor(1, a)).toMatchObject({ generation: 1 }); // per share
    expect(arena.shareFor(0, b)).toMatchObject({ generation: 2 });
    expect(arena.shareFor(0, a)).toMatchObject({ generation: 3 });
    arena.share(0);
    expect(arena.shareFor(0, a)).toMatchObject({ generation: 5 });
  });

  it('refuses a holder that is not an object and a share index out of range, as share() does', () => {
    const arena = createCodecArena(1 << 16, { threads: 1 });
    expect(() => arena.shareFor(0, 'worker' as never)).toThrow(/INVALID_ARGUMENT: shareFor's holder must be an object, got string "worker"/);
    expect(() => arena.shareFor(1, {})).toThrow(/INVALID_ARGUMENT: share index must be an integer in 0\.\.0/);
    expect(() => arena.shareFor('constructor' as never, {})).toThrow(/INVALID_ARGUMENT: share index/);
    expect(() => createCodecArena(1 << 16).shareFor(0, {})).toThrow(/INVALID_ARGUMENT: this arena is private/);
  });
});
