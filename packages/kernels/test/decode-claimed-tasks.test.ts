import {
  calibrateCodebook,
  computeOuterDigests,
  computeSegmentDigests,
  encode,
  OUTER_DIGESTS,
  readPayloadMeta,
  SEGMENT_DIGESTS,
  verifyOuterDigests,
} from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { CONTROL_DONE, CONTROL_TASK_DONE, countDone, createControl, decodeClaimedTasks, taskUnits } from '../src/decode-claimed-tasks.js';
import { modelLikeValues } from './fixtures.js';
import { firstMismatch, referenceDecode } from './reference-decode.js';

/** Atomics.waitAsync (Node >= 16; not in the ES2022 lib typings). */
const waitAsync = (Atomics as unknown as {
  waitAsync(array: Int32Array, index: number, value: number, timeoutMs: number): { async: boolean; value: Promise<unknown> | string };
}).waitAsync.bind(Atomics);

/**
 * Registers a waiter on the done slot (value 0); after `run`, Atomics.notify answers how many
 * waiters were still asleep: 0 if `run` woke it, 1 if not (no timing involved).
 */
function waitersLeftAfter(control: Int32Array, run: () => void): number {
  const waiting = waitAsync(control, CONTROL_DONE, 0, 60_000);
  expect(waiting.async).toBe(true);
  run();
  return Atomics.notify(control, CONTROL_DONE);
}

describe('done notifications of a decode job', () => {
  it('countDone wakes the waiters only when the job completes, or after every item without a target', () => {
    const control = createControl(3);
    expect(waitersLeftAfter(control, () => countDone(control, 3))).toBe(1);
    expect(Atomics.load(control, CONTROL_DONE)).toBe(1);
    const eachItem = createControl(3);
    expect(waitersLeftAfter(eachItem, () => countDone(eachItem, undefined))).toBe(0);
    const last = createControl(1);
    expect(waitersLeftAfter(last, () => countDone(last, 1))).toBe(0);
  });

  const values = modelLikeValues(5 * 64 * 64 + 17);
  const payload = encode(values, calibrateCodebook(values).codebook, { chunkSize: 64 });
  const meta = readPayloadMeta(payload);
  const expected = referenceDecode(payload);

  for (const [name, doneTarget, woken] of [
    ['the last task completes the job: waiters woken', 8, true],
    ['a checksum still to come: no waiter woken', 9, false],
    ['no target: woken by the tasks', undefined, true],
  ] as const) {
    it(`decodes every claimed task bit-exact; ${name}`, () => {
      const taskCount = 8;
      expect(taskUnits(meta, 'chunks')).toBeGreaterThanOrEqual(taskCount);
      const control = createControl(taskCount);
      const out = new Uint16Array(meta.elementCount).fill(0xdead);
      const left = waitersLeftAfter(control, () =>
        decodeClaimedTasks(payload, meta, out, control, taskCount, { kind: 'chunks', digests: null, doneTarget }),
      );
      expect(left).toBe(woken ? 0 : 1);
      expect(Atomics.load(control, CONTROL_DONE)).toBe(taskCount);
      expect(firstMismatch(out, expected)).toBe(-1);
    });
  }

  it('v3 segments: the digests of every segment are written whatever the target', () => {
    const big = modelLikeValues(2 ** 20 + 4099);
    const v3 = encode(big, calibrateCodebook(big).codebook);
    const m = readPayloadMeta(v3);
    expect(m.version).toBe(3);
    const units = taskUnits(m, 'segments');
    const control = createControl(units);
    const digests = new Uint32Array(SEGMENT_DIGESTS * units);
    const out = new Uint16Array(m.elementCount);
    const left = waitersLeftAfter(control, () => decodeClaimedTasks(v3, m, out, control, units, { kind: 'segments', digests, doneTarget: units }));
    expect(left).toBe(0);
    expect(digests.some((d) => d !== 0)).toBe(true);
    expect(firstMismatch(out, big)).toBe(-1);
  });

  it('v3 segments with the outer task: the segments split over the other tasks, the last one writes the outer digests', () => {
    const big = modelLikeValues(3 * 2 ** 20 + 77, 5);
    const v3 = encode(big, calibrateCodebook(big).codebook, { chunkSize: 256 });
    const m = readPayloadMeta(v3);
    const units = taskUnits(m, 'segments');
    expect(units).toBe(4);
    for (const ranges of [1, 2, 3, 4]) {
      const taskCount = ranges + 1;
      const control = createControl(taskCount);
      const digests = new Uint32Array(SEGMENT_DIGESTS * units + OUTER_DIGESTS);
      const out = new Uint16Array(m.elementCount).fill(0xdead);
      const left = waitersLeftAfter(control, () =>
        decodeClaimedTasks(v3, m, out, control, taskCount, { kind: 'segments', digests, doneTarget: taskCount, outerTask: true }),
      );
      expect(left).toBe(0);
      for (let k = 0; k < taskCount; k++) expect(Atomics.load(control, CONTROL_TASK_DONE + k)).toBe(1);
      expect(firstMismatch(out, big)).toBe(-1);
      const segments = digests.subarray(0, SEGMENT_DIGESTS * units);
      const outer = digests.subarray(SEGMENT_DIGESTS * units);
      expect(Array.from(segments)).toEqual(Array.from(computeSegmentDigests(v3, m, 0, units)));
      expect(Array.from(outer)).toEqual(Array.from(computeOuterDigests(v3, m)));
      expect(() => verifyOuterDigests(v3, m, segments, outer)).not.toThrow();
    }
  });
});
