import { describe, expect, it } from 'vitest';
import { runOrderedPipeline } from '../src/run-ordered-pipeline.js';

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('runOrderedPipeline', () => {
  it('yields in input order with at most `concurrency` tasks in flight', async () => {
    let inFlight = 0;
    let peak = 0;
    const items = Array.from({ length: 20 }, (_, i) => i);
    const out: number[] = [];
    for await (const value of runOrderedPipeline(items, {
      concurrency: 3,
      run: async (item) => {
        inFlight += 1;
        peak = Math.max(peak, inFlight);
        await delay((item * 7) % 5); // finish out of order
        inFlight -= 1;
        return item * 2;
      },
    })) {
      out.push(value);
    }
    expect(out).toEqual(items.map((i) => i * 2));
    expect(peak).toBe(3);
  });

  it('runs light tasks beside `concurrency` others, still within maxPending, in input order', async () => {
    // Items 0 and 1 are heavy and wait for a gate; the light ones behind them (odd items past 1
    // are heavy again) must start and finish meanwhile, the heavy ones never more than 2 at once.
    let openGate: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const heavy = (item: number) => item < 2 || (item > 6 && item % 2 === 1);
    let heavyRunning = 0;
    let heavyPeak = 0;
    const started: number[] = [];
    const items = Array.from({ length: 16 }, (_, i) => i);
    const pipeline = runOrderedPipeline(items, {
      concurrency: 2,
      maxPending: 8,
      isLight: (item) => !heavy(item),
      run: async (item) => {
        started.push(item);
        if (heavy(item)) {
          heavyRunning += 1;
          heavyPeak = Math.max(heavyPeak, heavyRunning);
          if (item < 2) await gate;
          else await delay(1);
          heavyRunning -= 1;
        }
        return item;
      },
    });
    const out: number[] = [];
    const consuming = (async () => {
      for await (const value of pipeline) out.push(value);
    })();
    await delay(20);
    // The heavy head holds both places; the light items 2..6 ran anyway (item 7, heavy, waits for a place).
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(out).toEqual([]);
    openGate();
    await consuming;
    expect(out).toEqual(items);
    expect(heavyPeak).toBe(2);
  });

  it('holds at most maxPending light results behind a slow head, besides maxPending others', async () => {
    let openGate: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const started: number[] = [];
    const items = Array.from({ length: 30 }, (_, i) => i);
    const pipeline = runOrderedPipeline(items, {
      concurrency: 1,
      maxPending: 4,
      isLight: (item) => item > 0,
      run: async (item) => {
        started.push(item);
        if (item === 0) await gate;
        return item;
      },
    });
    const out: number[] = [];
    const consuming = (async () => {
      for await (const value of pipeline) out.push(value);
    })();
    await delay(20);
    expect(started).toEqual([0, 1, 2, 3, 4]); // the heavy head, then 4 light results held
    openGate();
    await consuming;
    expect(out).toEqual(items);
  });

  it('keeps `concurrency` tasks running behind a slow head, holding at most maxPending results', async () => {
    let running = 0;
    let peakRunning = 0;
    let started = 0;
    const startedWhenHeadDone: number[] = [];
    let releaseHead: () => void = () => undefined;
    const headGate = new Promise<void>((resolve) => (releaseHead = resolve));
    const out: number[] = [];
    const iteration = (async () => {
      for await (const value of runOrderedPipeline(Array.from({ length: 30 }, (_, i) => i), {
        concurrency: 3,
        maxPending: 8,
        run: async (item) => {
          started += 1;
          running += 1;
          peakRunning = Math.max(peakRunning, running);
          if (item === 0) {
            await headGate;
            startedWhenHeadDone.push(started);
          } else {
            await delay(1);
          }
          running -= 1;
          return item;
        },
      })) {
        out.push(value);
      }
    })();
    await delay(60);
    // The head is stuck; the others ran to the pending limit (8 started), never more than 3 at once.
    expect(started).toBe(8);
    releaseHead();
    await iteration;
    expect(startedWhenHeadDone).toEqual([8]);
    expect(peakRunning).toBe(3);
    expect(out).toEqual(Array.from({ length: 30 }, (_, i) => i));
  });

  it('throws a failure at its position and waits for the other tasks first', async () => {
    const finished: number[] = [];
    const out: number[] = [];
    await expect(
      (async () => {
        for await (const value of runOrderedPipeline([0, 1, 2, 3], {
          concurrency: 4,
          run: async (item) => {
            await delay(item === 1 ? 1 : 20);
            if (item === 1) throw new Error('task 1 failed');
            finished.push(item);
            return item;
          },
        })) {
          out.push(value);
        }
      })(),
    ).rejects.toThrow('task 1 failed');
    expect(out).toEqual([0]);
    // Tasks 2 and 3 had started: they were awaited before the error surfaced.
    expect(finished.sort()).toEqual([0, 2, 3]);
  });

  it('on break, awaits started tasks and starts no more', async () => {
    const started: number[] = [];
    const finished: number[] = [];
    for await (const value of runOrderedPipeline([0, 1, 2, 3, 4, 5, 6, 7], {
      concurrency: 2,
      run: async (item) => {
        started.push(item);
        await delay(5);
        finished.push(item);
        return item;
      },
    })) {
      if (value === 1) break;
    }
    expect(finished.sort()).toEqual(started.sort());
    expect(started.length).toBeLessThanOrEqual(4);
  });

  it('turns a synchronous throw into an error at that position', async () => {
    const iterate = async () => {
      for await (const _ of runOrderedPipeline([1], {
        concurrency: 1,
        run: () => {
          throw new Error('sync');
        },
      })) {
        // nothing
      }
    };
    await expect(iterate()).rejects.toThrow('sync');
  });

  it('stops with ABORTED when the signal fires', async () => {
    const controller = new AbortController();
    const iterate = async () => {
      for await (const value of runOrderedPipeline([0, 1, 2, 3, 4], {
        concurrency: 1,
        signal: controller.signal,
        run: async (item) => item,
      })) {
        if (value === 1) controller.abort();
      }
    };
    await expect(iterate()).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('rejects a bad concurrency or maxPending', async () => {
    for (const options of [{ concurrency: 0 }, { concurrency: 2, maxPending: 1 }]) {
      const iterate = async () => {
        for await (const _ of runOrderedPipeline([1], { ...options, run: async (x) => x })) {
          // nothing
        }
      };
      await expect(iterate()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });

  it('starts the next tasks as earlier ones finish while the consumer still holds a result', async () => {
    let started = 0;
    const generator = runOrderedPipeline(Array.from({ length: 20 }, (_, i) => i), {
      concurrency: 2,
      maxPending: 6,
      run: async (item) => {
        started += 1;
        await new Promise((resolve) => setImmediate(resolve));
        return item;
      },
    });
    const first = await generator.next();
    expect(first.value).toBe(0);
    // The consumer is busy with result 0: finished tasks start the next ones themselves, up to
    // the pending bound (6 started and not consumed, besides the one held).
    await delay(50);
    expect(started).toBe(7);
    const rest: number[] = [];
    for await (const value of { [Symbol.asyncIterator]: () => generator }) rest.push(value);
    expect(rest).toEqual(Array.from({ length: 19 }, (_, i) => i + 1));
  });

  it('rethrows an error of the items iterator met while a finishing task starts the next', async () => {
    function* items() {
      yield 0;
      yield 1;
      throw new Error('items broke');
    }
    const seen: number[] = [];
    let finished = 0;
    await expect(
      (async () => {
        for await (const value of runOrderedPipeline(items(), {
          concurrency: 2,
          run: async (item) => {
            await delay(1);
            finished += 1;
            return item;
          },
        })) {
          seen.push(value);
        }
      })(),
    ).rejects.toThrow('items broke');
    expect(finished).toBe(2); // both tasks were awaited before the error left the generator
    expect(seen.length).toBeLessThanOrEqual(2);
  });
});
