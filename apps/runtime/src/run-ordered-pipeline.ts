import { abortedError, RuntimeError } from './errors.js';
import { argumentError, checkOptionsArgument } from './check-load-arguments.js';
import { takeTurnIfDue } from './take-turn-if-due.js';

export interface OrderedPipelineOptions<T, R> {
  /** Tasks running (started, not finished) at most. */
  concurrency: number;
  /**
   * Tasks started but not yet taken by the consumer, at most (≥ concurrency; default 4 × concurrency).
   * Finished tasks wait here for the ones before them: a long task at the head does not stop the
   * others from running, while the results held are still bounded.
   */
  maxPending?: number | undefined;
  run: (item: T, index: number) => Promise<R>;
  /**
   * Items whose task counts toward neither `concurrency` nor `maxPending` (light tasks have a
   * `maxPending` bound of their own): work too small to hold anything worth bounding, which would
   * otherwise take a place that a larger task's read needs.
   */
  isLight?: ((item: T, index: number) => boolean) | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Runs `run(item)` over `items` with at most `concurrency` tasks running (besides light ones, see
 * `isLight`) and yields the results in input order. At most `maxPending` tasks (and as many light
 * ones) are started and not yet consumed, so the memory held by finished-but-unconsumed results is
 * bounded too.
 *
 * If a task fails, the error is thrown at that task's position (earlier results are yielded
 * first). Whenever the iteration ends — done, failed, `break`, abort — every started task is
 * awaited before the generator returns, so nothing it owns (staging slots, caller buffers) is
 * still being written after the caller moves on.
 */
export async function* runOrderedPipeline<T, R>(items: Iterable<T>, options: OrderedPipelineOptions<T, R>): AsyncGenerator<R> {
  if (typeof (items as { [Symbol.iterator]?: unknown } | null)?.[Symbol.iterator] !== 'function') {
    throw new RuntimeError('INVALID_ARGUMENT', 'items must be iterable', { option: 'items' });
  }
  checkOptionsArgument(options);
  const { concurrency, run, signal, isLight } = options;
  const maxPending = options.maxPending ?? 4 * concurrency;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw argumentError('concurrency', 'a whole number >= 1', concurrency);
  }
  if (!Number.isSafeInteger(maxPending) || maxPending < concurrency) {
    throw argumentError('maxPending', `a whole number >= concurrency (${concurrency})`, maxPending);
  }
  const iterator = items[Symbol.iterator]();
  type Settled = { ok: true; value: R } | { ok: false; error: unknown };
  // Started tasks in input order; `settled` fills in when the task ends (a rejection is held as a
  // value, so one waiting here is never "unhandled").
  const window: { settled: Settled | undefined; done: Promise<void>; counted: boolean }[] = [];
  // Started and not yet consumed, by kind (light tasks are bounded apart: see isLight).
  let heldCounted = 0;
  let heldLight = 0;
  let exhausted = false;
  let stopped = false;
  let index = 0;
  let running = 0;
  // Wakes the consumer when the head task ends (or the items' iterator threw).
  let wakeHead: (() => void) | undefined;
  // The items' iterator threw while a finishing task was starting the next: the consumer rethrows it.
  let iterationFailure: { error: unknown } | undefined;

  // A task that ends starts the next one itself, in the same tick: the next read is asked at once,
  // not after a round trip through the consumer (for a model of many small tensors those hops were
  // a fixed cost per tensor, and a link left idle while they ran).
  // The next item, taken from the iterator but not started (it waits for a place among the running).
  let peeked: { value: T; counted: boolean } | undefined;
  const fill = () => {
    while (!stopped && !exhausted) {
      if (signal?.aborted) return;
      if (peeked === undefined) {
        const next = iterator.next();
        if (next.done) {
          exhausted = true;
          return;
        }
        // A light task takes no place among the `concurrency` running ones.
        peeked = { value: next.value, counted: isLight?.(next.value, index) !== true };
      }
      if (peeked.counted ? running >= concurrency || heldCounted >= maxPending : heldLight >= maxPending) return;
      const next = { value: peeked.value };
      const { counted } = peeked;
      peeked = undefined;
      const taskIndex = index;
      index += 1;
      if (counted) {
        running += 1;
        heldCounted += 1;
      } else {
        heldLight += 1;
      }
      const slot: (typeof window)[number] = { settled: undefined, done: undefined as unknown as Promise<void>, counted };
      const finish = (settled: Settled) => {
        slot.settled = settled;
        if (counted) running -= 1;
        try {
          fill();
        } catch (error) {
          exhausted = true;
          iterationFailure ??= { error };
          wakeHead?.();
        }
        if (window[0] === slot) wakeHead?.();
      };
      // Start on a microtask so a synchronous throw in `run` becomes a rejection here; after a turn
      // of the event loop when one is due (takeTurnIfDue: tasks whose steps settle at once start
      // each other without ever returning to the event loop), asked again right before it runs.
      const start = (): Promise<R> => {
        const turn = takeTurnIfDue();
        return turn === undefined ? run(next.value, taskIndex) : turn.then(start);
      };
      slot.done = Promise.resolve()
        .then(start)
        .then(
          (value) => finish({ ok: true, value }),
          (error: unknown) => finish({ ok: false, error }),
        );
      window.push(slot);
    }
  };

  /** The head task's outcome, once it has ended. */
  const awaitHead = async (): Promise<Settled> => {
    const head = window[0] as (typeof window)[number];
    while (head.settled === undefined) {
      if (iterationFailure !== undefined) throw iterationFailure.error;
      await new Promise<void>((resolve) => (wakeHead = resolve));
      wakeHead = undefined;
    }
    return head.settled;
  };

  try {
    fill();
    while (window.length > 0) {
      if (iterationFailure !== undefined) throw iterationFailure.error;
      if (signal?.aborted) throw abortedError('load aborted', signal);
      const settled = await awaitHead();
      if ((window.shift() as (typeof window)[number]).counted) heldCounted -= 1;
      else heldLight -= 1;
      if (!settled.ok) throw settled.error;
      // A place in the window is free: start what the pending bound held back, before yielding, so
      // the next reads run while the consumer handles this result.
      fill();
      yield settled.value;
    }
    if (iterationFailure !== undefined) throw iterationFailure.error;
    if (signal?.aborted) throw abortedError('load aborted', signal);
  } finally {
    stopped = true;
    await Promise.all(window.map((slot) => slot.done));
  }
}
