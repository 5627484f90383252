import { calibrateCodebook, createCodecArena, encode as codecEncode, isSplitZipError, readPayloadMeta } from '@splitzip/codec';
import { afterAll, describe, expect, it } from 'vitest';
import { createWorkerDecoder, type WorkerDecoder } from '../src/node.js';
import { allPatterns, escapeHeavyValues, largeModelLikeValues, modelLikeValues } from './fixtures.js';
import { firstMismatch, referenceDecode } from './reference-decode.js';

// The worker script is the built one (tests run after the build, as turbo orders them).
const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);

/** Copies `payload` into the decoder's arena and gives room for its values there. */
function inArena(decoder: WorkerDecoder, payload: Uint8Array): { payload: Uint8Array; out: Uint16Array } {
  const p = decoder.allocatePayload(payload.length);
  p.set(payload);
  return { payload: p, out: decoder.allocateOutput(readPayloadMeta(payload).elementCount) };
}

describe('worker-thread decoder with a shared codec arena', () => {
  // 1 worker + the calling thread (the 2-core setup); 3 workers + the calling thread with an arena
  // the caller made; and 2 workers doing every range and the checksum while the caller only
  // waits (so the workers' path is covered however the threads are scheduled).
  // All split the checksum from the decode (the default, stated so); the fused path on the
  // calling thread (splitChecksum: false) is covered in worker-decoder.test.ts.
  const split = { minParallelElements: 1, splitChecksum: true, workerUrl };
  const one = createWorkerDecoder({ threads: 1, arenaBytes: 80 << 20, ...split });
  const callerArena = createCodecArena(8 << 20, { threads: 3 });
  const three = createWorkerDecoder({ threads: 3, arena: callerArena, ...split });
  const workersOnly = createWorkerDecoder({ threads: 2, arenaBytes: 8 << 20, callerDecodes: false, ...split });
  const decoders = [one, three, workersOnly];
  afterAll(async () => {
    for (const d of decoders) await d.dispose();
  });

  const values = modelLikeValues(300_007);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);

  const cases: [string, () => Uint8Array][] = [
    ['all 65,536 patterns, 64-value chunks', () => codecEncode(allPatterns(), codebook, { chunkSize: 64 })],
    ['model-like, odd size', () => payload],
    ['escape-heavy, odd size, 128-value chunks', () => codecEncode(escapeHeavyValues(50_001), codebook, { chunkSize: 128 })],
    ['odd size below one group per task', () => codecEncode(modelLikeValues(4_097, 5), codebook, { chunkSize: 64 })],
  ];
  for (const [name, make] of cases) {
    it(`is bit-exact in place against the scalar reference: ${name}`, async () => {
      const p = make();
      const expected = referenceDecode(p);
      for (const decoder of decoders) {
        for (const verify of [true, false]) {
          decoder.arena!.reset();
          const views = inArena(decoder, p);
          views.out.fill(0xdead);
          const result = await decoder.decode(views.payload, views.out, { verify });
          expect(result).toBe(views.out);
          expect(firstMismatch(result, expected)).toBe(-1);
        }
      }
    });
  }

  it('decodes more than 2^24 values bit-exact in the arena', async () => {
    const big = largeModelLikeValues(2 ** 24 + 1_001);
    const p = codecEncode(big, calibrateCodebook(big).codebook);
    one.arena!.reset();
    const views = inArena(one, p);
    expect(firstMismatch(await one.decode(views.payload, views.out), big)).toBe(-1);
    // The same payload from an ordinary array (staged in the decoder's own arena) into new shared
    // memory, with the caller helping and with the workers doing everything; and ordinary to
    // ordinary (decoded on the calling thread).
    expect(firstMismatch(await one.decode(p), big)).toBe(-1);
    expect(firstMismatch(await workersOnly.decode(p), big)).toBe(-1);
    expect(firstMismatch(await workersOnly.decode(p, new Uint16Array(big.length)), big)).toBe(-1);
  });

  it('mixes arena, SharedArrayBuffer and ordinary payloads and outputs, bit-exact, leaving the rest of out alone', async () => {
    const n = values.length;
    const shared = new Uint8Array(new SharedArrayBuffer(payload.length + 5));
    shared.set(payload, 5);
    const sharedOut = new Uint16Array(new SharedArrayBuffer(2 * n + 4), 2, n);
    for (const decoder of decoders) {
      decoder.arena!.reset();
      const views = inArena(decoder, payload);
      const ordinaryOut = new Uint16Array(n + 1).fill(7);
      const pairs: [Uint8Array, Uint16Array][] = [
        [views.payload, ordinaryOut],
        [payload, views.out],
        [shared.subarray(5), views.out],
        [views.payload, sharedOut],
        [payload, ordinaryOut],
      ];
      for (const [p, out] of pairs) {
        out.fill(0xbeef, 0, n);
        await decoder.decode(p, out);
        expect(firstMismatch(out.subarray(0, n), values)).toBe(-1);
      }
      expect(ordinaryOut[n]).toBe(7);
    }
  });

  it('stages an ordinary side at the top of its own arena when the other side is there, and gives the room back', async () => {
    const n = values.length;
    const base = createCodecArena(8 << 20, { threads: 1 });
    const borrowed: number[] = [];
    let allocateAbove = false;
    let above: Uint8Array | null = null;
    // The decoder's arena, watched: every allocation it makes for itself is recorded.
    const watched = {
      ...base,
      get usedBytes() {
        return base.usedBytes;
      },
      get zeroCopy() {
        return base.zeroCopy;
      },
      allocate: (bytes: number) => {
        borrowed.push(bytes);
        const view = base.allocate(bytes);
        // Someone else allocating while the decoder holds its room.
        if (allocateAbove) above = base.allocate(64).fill(0x5a);
        return view;
      },
    };
    const d = createWorkerDecoder({ threads: 1, arena: watched, ...split });
    try {
      const views = { payload: base.allocate(payload.length), out: base.allocateValues(n) };
      views.payload.set(payload);
      const used = base.usedBytes;
      const bad = payload.slice();
      bad[readPayloadMeta(payload).layout.codes.offsetBytes + 999]! ^= 0x10;
      for (const verify of [true, false]) {
        borrowed.length = 0;
        views.out.fill(0);
        await d.decode(payload, views.out, { verify });
        expect(firstMismatch(views.out, values)).toBe(-1);
        const ordinaryOut = new Uint16Array(n);
        await d.decode(views.payload, ordinaryOut, { verify });
        expect(firstMismatch(ordinaryOut, values)).toBe(-1);
        // One borrow per decode (the payload's room, then the values'), both given back.
        expect(borrowed).toEqual([Math.ceil(payload.length / 256) * 256, 2 * n]);
        expect(base.usedBytes).toBe(used);
      }
      // A failed decode gives the room back too.
      await expect(d.decode(bad, views.out)).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH' });
      expect(base.usedBytes).toBe(used);
      // Something allocated above the borrowed room keeps it (stack order), and nothing is overwritten.
      allocateAbove = true;
      await d.decode(payload, views.out);
      allocateAbove = false;
      expect(firstMismatch(views.out, values)).toBe(-1);
      expect(above!.every((b) => b === 0x5a)).toBe(true);
      expect(base.usedBytes).toBe(used + Math.ceil(payload.length / 256) * 256 + 256);
      // No room left in the arena: the decoder's own staging arena takes the ordinary side.
      base.reset();
      const full = { payload: base.allocate(payload.length), out: base.allocateValues(n) };
      full.payload.set(payload);
      base.allocate(base.byteLength - base.usedBytes);
      const fullUsed = base.usedBytes;
      await d.decode(payload, full.out);
      expect(firstMismatch(full.out, values)).toBe(-1);
      expect(base.usedBytes).toBe(fullUsed);
    } finally {
      await d.dispose();
    }
  });

  it('grows its staging arena for ordinary arrays and keeps decoding after', async () => {
    for (const callerDecodes of [true, false]) {
      const d = createWorkerDecoder({ threads: 1, callerDecodes, ...split });
      try {
        for (const n of [10_001, 700_001, 3_001, 1_500_001]) {
          const v = modelLikeValues(n, n);
          const p = codecEncode(v, codebook, { chunkSize: 256 });
          const out = await d.decode(p);
          expect(out.buffer).toBeInstanceOf(SharedArrayBuffer);
          expect(firstMismatch(out, v)).toBe(-1);
          // An ordinary out stays ordinary, whichever thread decodes.
          const ordinary = await d.decode(p, new Uint16Array(n));
          expect(ordinary.buffer).not.toBeInstanceOf(SharedArrayBuffer);
          expect(firstMismatch(ordinary, v)).toBe(-1);
        }
      } finally {
        await d.dispose();
      }
    }
  });

  it('never returns data from a payload whose checksum fails, whichever thread checks it', async () => {
    const bad = payload.slice();
    bad[readPayloadMeta(payload).layout.sm.offsetBytes + 12_345]! ^= 0x01;
    for (const decoder of decoders) {
      decoder.arena!.reset();
      const views = inArena(decoder, bad);
      for (let round = 0; round < 10; round++) {
        await expect(decoder.decode(views.payload, views.out)).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH' });
        await expect(decoder.decode(bad, new Uint16Array(values.length))).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH' });
      }
      // Without the check the flipped bit decodes (structure is still checked): one value differs.
      const out = await decoder.decode(views.payload, views.out, { verify: false });
      expect(firstMismatch(out, values)).toBe(12_345);
    }
  });

  it('fails a flipped byte that only the outer digests cover (escape sections and their padding), several segments in place', async () => {
    // Two checksum segments: the outer digests are one task of the plan, taken by whichever thread.
    const big = escapeHeavyValues(2 ** 20 + 5_003);
    const p = codecEncode(big, codebook, { chunkSize: 128 });
    const meta = readPayloadMeta(p);
    const { escapeIndex, escapePositions, escapeExponents } = meta.layout;
    // Each escape section's first byte and last padding byte (a header flip fails the header's own
    // checks first: the codec's tests cover its digest).
    const spots = [escapeIndex.offsetBytes, escapePositions.offsetBytes - 1, escapePositions.offsetBytes, escapeExponents.offsetBytes - 1, meta.layout.totalBytes - 1];
    for (const decoder of decoders) {
      decoder.arena!.reset();
      const views = inArena(decoder, p);
      expect(firstMismatch(await decoder.decode(views.payload, views.out), big)).toBe(-1);
      for (const at of spots) {
        views.payload[at]! ^= 0x20;
        await expect(decoder.decode(views.payload, views.out), `flip at ${at}`).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH' });
        views.payload[at]! ^= 0x20;
      }
      expect(firstMismatch(await decoder.decode(views.payload, views.out), big)).toBe(-1);
    }
  });

  it('reports a bad checksum before a structural error, and the structural error without verify', async () => {
    const meta = readPayloadMeta(payload);
    expect(meta.escapeCount).toBeGreaterThan(0);
    const bad = payload.slice();
    new DataView(bad.buffer).setUint16(meta.layout.escapePositions.offsetBytes, 0xffff, true);
    for (const decoder of decoders) {
      decoder.arena!.reset();
      const views = inArena(decoder, bad);
      for (let round = 0; round < 5; round++) {
        await expect(decoder.decode(views.payload, views.out)).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH' });
        const error = await decoder.decode(views.payload, views.out, { verify: false }).catch((e: unknown) => e);
        expect(isSplitZipError(error)).toBe(true);
        expect(error).toMatchObject({ code: 'BAD_ESCAPE_POSITION' });
        // The same from an ordinary payload, copied in range by range while the workers decode.
        await expect(decoder.decode(bad, views.out)).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH' });
        await expect(decoder.decode(bad, views.out, { verify: false })).rejects.toMatchObject({ code: 'BAD_ESCAPE_POSITION' });
      }
      // The pool survives failed jobs.
      expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1);
    }
  });

  it('rejects a short out, a truncated payload in the arena, and bad arenas', async () => {
    one.arena!.reset();
    const views = inArena(one, payload);
    await expect(one.decode(views.payload, views.out.subarray(1))).rejects.toMatchObject({ code: 'OUTPUT_TOO_SMALL' });
    await expect(one.decode(views.payload.subarray(0, payload.length - 300), views.out)).rejects.toMatchObject({ code: 'TRUNCATED' });
    expect(() => createWorkerDecoder({ threads: 4, arena: callerArena })).toThrow(/threads >= 4/);
    expect(() => createWorkerDecoder({ threads: 1, arena: createCodecArena(1 << 16) })).toThrow(/shared/);
    expect(() => createWorkerDecoder({ threads: 1, arena: callerArena, arenaBytes: 1 << 16 })).toThrow(/not both/);
    const plain = createWorkerDecoder({ threads: 1 });
    expect(plain.arena).toBeNull();
    expect(() => plain.allocatePayload(16)).toThrow(/no arena/);
    expect(() => one.allocateOutput(2 ** 40)).toThrow();
    await plain.dispose();
  });
});

// Two decoders over one caller's arena, used in turn. Creating the second one handed a share out
// again (its options check called arena.share), and its decodes took the first one's shares: the
// first decoder's workers were then refused ("share … was handed out again") for good.
describe('two worker decoders over one caller arena, in turn', () => {
  it('each decodes right after the other used the arena, and creating one retires nothing', async () => {
    const arena = createCodecArena(24 << 20, { threads: 2 });
    const options = { arena, threads: 2, callerDecodes: false, minParallelElements: 1, workerUrl };
    const first = createWorkerDecoder(options);
    const values = modelLikeValues(1_000_003, 9);
    const source = codecEncode(values, calibrateCodebook(values).codebook);
    const payload = arena.allocate(source.length);
    payload.set(source);
    const out = arena.allocateValues(values.length);
    const expected = referenceDecode(source);
    let second: WorkerDecoder | undefined;
    try {
      for (const step of ['first', 'create second', 'first', 'second', 'first', 'second'] as const) {
        if (step === 'create second') {
          second = createWorkerDecoder(options);
          continue;
        }
        out.fill(0xdead);
        await (step === 'first' ? first : second!).decode(payload, out, { verify: true });
        expect(firstMismatch(out, expected), step).toBe(-1);
      }
    } finally {
      await first.dispose();
      await second?.dispose();
    }
  }, 60_000);
});
