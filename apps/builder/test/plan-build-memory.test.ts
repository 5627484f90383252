// How a build splits its memory bound between the slab and its worker threads (pure functions of
// the model's sizes), checked against the model the constants describe: peak RSS = the process +
// the slab + one fixed amount per worker.
import { describe, expect, it } from 'vitest';
import {
  computeRssBoundBytes,
  countStartupWorkers,
  INLINE_MAX_BUILD_BYTES,
  MIN_IN_FLIGHT_BYTES,
  planBuildMemory,
  PROCESS_RSS_BYTES,
  resolveBuildJobs,
  RSS_HEADROOM_BYTES,
  SLAB_LARGEST_FACTOR,
  WORKER_RSS_BYTES,
} from '../src/plan-build-memory.js';

const MB = 1e6;
/** Raw bytes plus a worst payload (~0.78 x) of one largest tensor, as the build asks. */
const inFlightOf = (largestBytes: number): number => Math.ceil(largestBytes * 1.78);
const plan = (jobs: number, largestBytes: number, tensorCount = 1000) =>
  planBuildMemory({ jobs, largestBytes, tensorCount, largestInFlightBytes: inFlightOf(largestBytes) });
/** Peak RSS the constants predict for a plan, headroom included. */
const predictedRss = (p: { slabBytes: number; workers: number }): number => PROCESS_RSS_BYTES + p.slabBytes + p.workers * WORKER_RSS_BYTES + RSS_HEADROOM_BYTES;

describe('planBuildMemory', () => {
  it('runs fewer workers than --jobs 8 on a model of small tensors (the measured violation: largest 8.4 MB)', () => {
    const p = plan(8, 8.4 * MB, 205);
    expect(p.boundBytes).toBeCloseTo(175.2 * MB, -3);
    expect(p.workers).toBe(4);
    // The slab keeps its floor (3 x 8.4 MB is less).
    expect(p.slabBytes).toBe(MIN_IN_FLIGHT_BYTES);
    expect(predictedRss(p)).toBeLessThanOrEqual(p.boundBytes);
    // --jobs 2 (the default here) is untouched.
    expect(plan(2, 8.4 * MB, 205).workers).toBe(2);
  });

  it('keeps the slab at 3 x the largest tensor and fits five workers beside it on big models', () => {
    // (The plan counts workers against a 3 x largest slab; what five leave is less than a sixth.)
    const largestBytes = 33_554_432;
    const p = plan(8, largestBytes, 241);
    expect(p.slabBytes).toBe(SLAB_LARGEST_FACTOR * largestBytes);
    expect(p.workers).toBe(5);
    expect(plan(8, 268 * MB).workers).toBe(5);
    expect(plan(3, 268 * MB).workers).toBe(3);
  });

  it('never more workers than tensors to encode, at least one, none for --jobs 0', () => {
    expect(plan(8, 100 * MB, 1).workers).toBe(1);
    expect(plan(8, 100 * MB, 3).workers).toBe(3);
    expect(plan(2, 100 * MB, 0).workers).toBe(1);
    expect(plan(0, 100 * MB).workers).toBe(0);
    // No workers: the same slab (what workers would have taken stays unused).
    expect(plan(0, 100 * MB).slabBytes).toBe(SLAB_LARGEST_FACTOR * 100 * MB);
  });

  it('does not grow the slab into what the workers leave of the bound (payloads leave it once written)', () => {
    // --jobs 2 on the 1.16 GB benchmark model (largest 33.5 MB): 3 x 33.5 MB, not the 140 MB left.
    const largestBytes = 33_554_432;
    const p = plan(2, largestBytes, 119);
    expect(p.workers).toBe(2);
    expect(p.slabBytes).toBe(SLAB_LARGEST_FACTOR * largestBytes);
    expect(predictedRss(p)).toBeLessThan(p.boundBytes - 30 * MB);
    // One largest tensor always fits, whatever the factor gives.
    expect(planBuildMemory({ jobs: 2, largestBytes: 10 * MB, tensorCount: 5, largestInFlightBytes: 40 * MB }).slabBytes).toBe(40 * MB);
  });

  it('for any model and --jobs: under the bound, as many workers as fit, at most jobs', () => {
    for (const largestBytes of [0, 2, 1e5, 1 * MB, 4 * MB, 8.4 * MB, 11 * MB, 11.3 * MB, 20 * MB, 33.6 * MB, 268 * MB, 4 * 2 ** 30]) {
      for (const jobs of [1, 2, 3, 4, 5, 6, 8, 16, 64]) {
        for (const tensorCount of [1, 2, 7, 1000]) {
          const p = plan(jobs, largestBytes, tensorCount);
          const where = `largest ${largestBytes}, jobs ${jobs}, tensors ${tensorCount}`;
          expect(p.boundBytes, where).toBe(computeRssBoundBytes(largestBytes));
          expect(p.slabBytes, where).toBeGreaterThanOrEqual(inFlightOf(largestBytes));
          expect(p.workers, where).toBeGreaterThanOrEqual(1);
          expect(p.workers, where).toBeLessThanOrEqual(Math.min(jobs, tensorCount));
          expect(predictedRss(p), where).toBeLessThanOrEqual(p.boundBytes);
          // Maximal: either every worker asked for (or needed) runs, or one more would not fit.
          if (p.workers < Math.min(jobs, tensorCount)) expect(predictedRss({ ...p, workers: p.workers + 1 }), where).toBeGreaterThan(p.boundBytes);
        }
      }
    }
  });

  it('a slab asked for beyond the bound still runs one worker', () => {
    const p = planBuildMemory({ jobs: 4, largestBytes: 1 * MB, tensorCount: 10, largestInFlightBytes: inFlightOf(1 * MB), maxInFlightBytes: 500 * MB });
    expect(p.slabBytes).toBe(500 * MB);
    expect(p.workers).toBe(1);
  });
});

describe('countStartupWorkers', () => {
  it('starts before the model is known only workers that fit every model', () => {
    expect(countStartupWorkers(0)).toBe(0);
    expect(countStartupWorkers(1)).toBe(1);
    expect(countStartupWorkers(2)).toBe(2);
    expect(countStartupWorkers(8)).toBe(2);
    for (const largestBytes of [0, 1, 1 * MB, 8.4 * MB, 33.6 * MB, 268 * MB]) {
      for (const jobs of [1, 2, 8]) expect(countStartupWorkers(jobs)).toBeLessThanOrEqual(plan(jobs, largestBytes).workers);
    }
  });
});

describe('resolveBuildJobs', () => {
  it('builds models with at most the inline limit of BF16 on the calling thread, larger ones with the jobs asked for', () => {
    expect(INLINE_MAX_BUILD_BYTES).toBe(128 * 1024 * 1024);
    expect(resolveBuildJobs(2, 0)).toBe(0);
    expect(resolveBuildJobs(2, 13_947_146)).toBe(0); // the default model
    expect(resolveBuildJobs(8, INLINE_MAX_BUILD_BYTES)).toBe(0);
    expect(resolveBuildJobs(8, INLINE_MAX_BUILD_BYTES + 1)).toBe(8);
    expect(resolveBuildJobs(0, 10 * INLINE_MAX_BUILD_BYTES)).toBe(0);
    // A limit of 0 keeps workers for any model with something to encode, and none for an empty one.
    expect(resolveBuildJobs(2, 1, 0)).toBe(2);
    expect(resolveBuildJobs(2, 0, 0)).toBe(0);
    expect(resolveBuildJobs(3, 5 * 2 ** 20, 5 * 2 ** 20)).toBe(0);
    expect(resolveBuildJobs(3, 5 * 2 ** 20 + 2, 5 * 2 ** 20)).toBe(3);
  });
});
