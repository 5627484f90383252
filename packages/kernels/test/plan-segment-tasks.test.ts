import { SEGMENT_VALUES, type PayloadMeta } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createSegmentPlanner, planSegmentTasks } from '../src/plan-segment-tasks.js';

// Only elementCount is read by the planner.
const metaOf = (elementCount: number): PayloadMeta => ({ elementCount }) as PayloadMeta;

describe('planSegmentTasks', () => {
  const counts = [1, SEGMENT_VALUES - 1, SEGMENT_VALUES, SEGMENT_VALUES + 1, 16 * SEGMENT_VALUES, 17 * SEGMENT_VALUES + 3, 64 * SEGMENT_VALUES, 1000 * SEGMENT_VALUES + 1];

  it('decodes and hashes every segment exactly once, in order, the outer digests last', () => {
    for (const n of counts) {
      const segments = Math.ceil(n / SEGMENT_VALUES);
      for (const decoders of [1, 2, 3, 8, 33]) {
        const tasks = planSegmentTasks(metaOf(n), decoders);
        const fused = tasks.filter((t) => t.op === 'fused');
        expect(tasks.filter((t) => t.op === 'outer')).toHaveLength(1);
        expect(tasks.at(-1)!.op).toBe('outer');
        let next = 0;
        for (const task of fused) {
          expect(task.first).toBe(next);
          expect(task.end).toBeGreaterThan(task.first);
          next = task.end;
        }
        expect(next).toBe(segments);
      }
    }
  });

  it('gives shrinking ranges that end in single segments, a few per thread', () => {
    for (const n of counts) {
      for (const decoders of [1, 2, 4]) {
        const sizes = planSegmentTasks(metaOf(n), decoders)
          .filter((t) => t.op === 'fused')
          .map((t) => t.end - t.first);
        for (let k = 1; k < sizes.length; k++) expect(sizes[k]!).toBeLessThanOrEqual(sizes[k - 1]!);
        expect(sizes.at(-1)).toBe(1);
        // No task over a quarter of the work per thread, so no thread holds much when the others run out.
        const segments = Math.ceil(n / SEGMENT_VALUES);
        expect(sizes[0]!).toBeLessThanOrEqual(Math.max(1, segments / (4 * decoders)));
      }
    }
    // 2^24 values on 2 threads: 2 segments, then 14 single ones; 2^26: 8 segments first, then fewer.
    expect(planSegmentTasks(metaOf(16 * SEGMENT_VALUES), 2).map((t) => t.end - t.first)).toEqual([2, ...Array(14).fill(1), 0]);
    const at26 = planSegmentTasks(metaOf(64 * SEGMENT_VALUES), 2);
    expect(at26[0]).toEqual({ op: 'fused', first: 0, end: 8 });
    expect(at26.length).toBeLessThan(40);
  });

  it('a planner answers the same list again for the same meta and thread count, a new one otherwise', () => {
    const plan = createSegmentPlanner();
    const a = metaOf(5 * SEGMENT_VALUES);
    const first = plan(a, 2);
    expect(plan(a, 2)).toBe(first);
    expect(plan(a, 3)).toEqual(planSegmentTasks(a, 3));
    const b = metaOf(40 * SEGMENT_VALUES);
    expect(plan(b, 3)).toEqual(planSegmentTasks(b, 3));
    expect(plan(a, 2)).toEqual(first);
  });
});
