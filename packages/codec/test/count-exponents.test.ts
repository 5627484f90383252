// countExponents on both backends (the wasm kernel: four lane tables, in place in a codec arena or
// block by block through scratch; the JS loop) against a one-table scalar count written here.
import { existsSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { CODEC_DIST_PATH, startArenaWorkers } from './arena-workers.js';
import { kernelsFor } from '../src/backend.js';
import { WASM_COUNT_MIN_VALUES } from '../src/count-exponents.js';
import { attachCodecArena, countExponents, createCodecArena, getCodecBackend, setCodecBackend } from '../src/index.js';
import { BLOCK_VALUES, createWasmKernels } from '../src/wasm/wasm-kernels.js';
import { BACKENDS, codeOf, useBackend } from './backends.js';
import { allBf16Patterns, gaussianBf16, randomBf16 } from './reference.js';

afterEach(() => setCodecBackend('auto'));
afterAll(() => setCodecBackend('auto'));

/** The oracle: one loop, one table, wrapping like a Uint32Array store. */
function referenceCount(values: ArrayLike<number>, start?: ArrayLike<number>): number[] {
  const hist = start ? Array.from(start) : new Array<number>(256).fill(0);
  for (let i = 0; i < values.length; i++) {
    const e = (values[i]! >>> 7) & 0xff;
    hist[e] = (hist[e]! + 1) % 2 ** 32;
  }
  return hist;
}

/**
 * Exponent 1 everywhere except value positions ≡ lane (mod 8), which carry exponent 200 + lane:
 * a lane counted into the wrong table offset or bin, or a table left out of the sum, shows.
 */
function laneMarked(n: number, lane: number): Uint16Array {
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = ((i % 8 === lane ? 200 + lane : 1) << 7) | (i & 0x7f) | (i & 1 ? 0x8000 : 0);
  return out;
}

const SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, WASM_COUNT_MIN_VALUES - 1, WASM_COUNT_MIN_VALUES, WASM_COUNT_MIN_VALUES + 1];
const LARGE_SIZES = [BLOCK_VALUES - 1, BLOCK_VALUES, BLOCK_VALUES + 1, 3 * BLOCK_VALUES + 5];

describe.each(BACKENDS)('countExponents (%s)', (backend) => {
  it('matches the scalar count on random data at every size (block edges, odd tails)', () => {
    useBackend(backend);
    for (const n of [...SIZES, ...LARGE_SIZES]) {
      const values = randomBf16(n, 1000 + n);
      expect(Array.from(countExponents(values)), `n = ${n}`).toEqual(referenceCount(values));
    }
  });

  it('counts all 65,536 bit patterns and Gaussian weights exactly', () => {
    useBackend(backend);
    const all = allBf16Patterns(3);
    expect(Array.from(countExponents(all))).toEqual(new Array<number>(256).fill(256));
    const weights = gaussianBf16(100003, 0.02, 4);
    expect(Array.from(countExponents(weights))).toEqual(referenceCount(weights));
  });

  it('puts every lane position in its own bin (lane-marked input, every start offset)', () => {
    useBackend(backend);
    for (let lane = 0; lane < 8; lane++) {
      const values = laneMarked(4 * BLOCK_VALUES + 8, lane);
      for (let start = 0; start < 8; start++) {
        const view = values.subarray(start, start + 2 * WASM_COUNT_MIN_VALUES + 3);
        expect(Array.from(countExponents(view)), `lane ${lane} start ${start}`).toEqual(referenceCount(view));
      }
      expect(Array.from(countExponents(values)), `lane ${lane}, whole`).toEqual(referenceCount(values));
    }
  });

  it('views that start mid-word (odd u16 offsets) outside an arena', () => {
    useBackend(backend);
    const values = randomBf16(2 * BLOCK_VALUES + 40, 5);
    for (const start of [1, 3, 5]) {
      for (const length of [3, 1001, BLOCK_VALUES + 7]) {
        const view = values.subarray(start, start + length);
        expect(Array.from(countExponents(view)), `start ${start} length ${length}`).toEqual(referenceCount(view));
      }
    }
  });

  it('adds to a histogram that already holds counts, wrapping each bin mod 2^32', () => {
    useBackend(backend);
    const values = randomBf16(BLOCK_VALUES + 13, 6);
    const start = new Uint32Array(256);
    for (let e = 0; e < 256; e++) start[e] = e % 3 === 0 ? 0xffffffff - e : e * 1000;
    const expected = referenceCount(values, start);
    const hist = Uint32Array.from(start);
    expect(countExponents(values, hist)).toBe(hist);
    expect(Array.from(hist)).toEqual(expected);
    // Twice over slices is once over the whole.
    const twice = countExponents(values.subarray(500), countExponents(values.subarray(0, 500)));
    expect(Array.from(twice)).toEqual(referenceCount(values));
  });

  it('keeps its argument errors', () => {
    useBackend(backend);
    expect(codeOf(() => countExponents([1] as unknown as Uint16Array))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => countExponents(new Uint16Array(300), new Uint32Array(255)))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => countExponents(new Uint16Array(300), new Int32Array(256) as unknown as Uint32Array))).toBe('INVALID_ARGUMENT');
  });

  it.each([0, 1])('views in a codec arena (threads: %i), at every alignment, in place', (threads) => {
    useBackend(backend);
    const arena = createCodecArena(4 * BLOCK_VALUES * 2 + 4096, { threads });
    const inArena = arena.allocateValues(3 * BLOCK_VALUES + 16);
    inArena.set(randomBf16(inArena.length, 7 + threads));
    for (const start of [0, 1, 2, 3, 5]) {
      for (const length of [...SIZES, BLOCK_VALUES + 3, 3 * BLOCK_VALUES + 5]) {
        const view = inArena.subarray(start, start + length);
        expect(Array.from(countExponents(view)), `start ${start} length ${length}`).toEqual(referenceCount(view));
      }
    }
    for (let lane = 0; lane < 8; lane++) {
      inArena.set(laneMarked(inArena.length, lane));
      expect(Array.from(countExponents(inArena.subarray(1))), `lane ${lane}`).toEqual(referenceCount(inArena.subarray(1)));
    }
  });
});

describe('countExponents dispatch', () => {
  it('uses the wasm kernel from WASM_COUNT_MIN_VALUES on, the JS loop below it and when js is forced', () => {
    const arena = createCodecArena(1 << 16);
    const view = arena.allocateValues(WASM_COUNT_MIN_VALUES);
    view.set(randomBf16(view.length, 8));
    const spy = vi.spyOn(kernelsFor(view), 'countExponents');
    try {
      expect(getCodecBackend()).toBe('wasm-simd');
      countExponents(view);
      expect(spy).toHaveBeenCalledTimes(1);
      countExponents(view.subarray(1));
      expect(spy).toHaveBeenCalledTimes(1);
      setCodecBackend('js');
      countExponents(view);
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });

  it('the wasm kernels alone match the scalar count below the threshold too, at a non-zero scratch base', () => {
    const wasm = createWasmKernels(1 << 16, { shared: true })!;
    const arena = createCodecArena(1 << 16, { threads: 1 });
    const attached = attachCodecArena(arena.share(0));
    const values = randomBf16(WASM_COUNT_MIN_VALUES, 9);
    const inArena = new Uint16Array(attached.buffer, arena.allocateValues(values.length).byteOffset, values.length);
    inArena.set(values);
    for (const kernels of [wasm.kernels, kernelsFor(inArena)]) {
      for (const n of SIZES) {
        for (const view of [values.subarray(0, n), inArena.subarray(0, n), inArena.subarray(1, 1 + Math.max(0, n - 1))]) {
          const hist = new Uint32Array(256).fill(5);
          kernels.countExponents!(view, hist);
          expect(Array.from(hist), `n = ${n}`).toEqual(referenceCount(view, new Array<number>(256).fill(5)));
        }
      }
    }
  });

  it('worker threads count views of a shared arena in place (built dist)', async () => {
    expect(existsSync(CODEC_DIST_PATH), `${CODEC_DIST_PATH} is missing: build the package first`).toBe(true);
    const countJob = `
      const hist = codec.countExponents(new Uint16Array(arena.buffer, job.at, job.count));
      return { ok: true, hist: Array.from(hist) };`;
    const arena = createCodecArena(8 << 20, { threads: 2 });
    const { workers, ask, attach, terminate } = startArenaWorkers(countJob, arena, 2);
    try {
      expect(await attach()).toEqual([true, true]);
      const values = arena.allocateValues(1 << 20);
      values.set(gaussianBf16(values.length, 0.02, 10));
      const half = values.length / 2 + 3;
      const jobs = [
        { at: values.byteOffset + 2, count: half - 1 },
        { at: values.byteOffset + 2 * half, count: values.length - half },
      ];
      const replies = await Promise.all(workers.map((worker, i) => ask(worker, jobs[i]!)));
      for (const [i, reply] of replies.entries()) {
        expect(reply.ok, String(reply.message)).toBe(true);
        const job = jobs[i]!;
        expect(reply.hist).toEqual(referenceCount(values.subarray((job.at - values.byteOffset) / 2, (job.at - values.byteOffset) / 2 + job.count)));
      }
    } finally {
      await terminate();
    }
  });
});
