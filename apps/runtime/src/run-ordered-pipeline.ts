import { RuntimeError } from './errors.js';

export interface OrderedPipelineOptions<T, R> {
  /** Tasks running (started, not finished) at most. */
  concurrency: number;
  /**
   * Tasks started but not yet taken by the consumer, at most (≥ concurrency; default 4 × concurrency).
   * Finished tasks wait here for the ones before them: a long task at the head does not stop the
   * others from running, while the results held are still bounded.
   */
  maxPending?: number;
  run: (item: T, index: number) => Promise<R>;
  signal?: AbortSignal;
}

/**
 * Runs `run(item)` over `items` with at most `concurrency` tasks running and yields the results in
 * input order. At most `maxPending` tasks are started and not yet consumed, so the memory held by
 * finished-but-unconsumed results is bounded too.
 *
 * If a task fails, the error is thrown at that task's position (earlier results are yielded
 * first). Whenever the iteration ends — done, failed, `break`, abort — every started task is
 * awaited before the generator returns, so nothing it owns (staging slots, caller buffers) is
 * still being written after the caller moves on.
 */
export async function* runOrderedPipeline<T, R>(items: Iterable<T>, options: OrderedPipelineOptions<T, R>): AsyncGenerator<R> {
  const { concurrency, run, signal } = options;
  const maxPending = options.maxPending ?? 4 * concurrency;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new RuntimeError('INVALID_ARGUMENT', 'concurrency must be a positive integer', { concurrency });
  }
  if (!Number.isSafeInteger(maxPending) || maxPending < concurrency) {
    throw new RuntimeError('INVALID_ARGUMENT', 'maxPending must be an integer ≥ concurrency', { concurrency, maxPending });
  }
  const iterator = items[Symbol.iterator]();
  // Settled-state wrappers so a rejection waiting in the window is never "unhandled".
  const window: Promise<{ ok: true; value: R } | { ok: false; error: unknown }>[] = [];
  let index = 0;
  let exhausted = false;
  let running = 0;
  // Wakes the consumer when a task finishes (so it can start the next one).
  let wake: (() => void) | undefined;

  const fill = () => {
    while (!exhausted && running < concurrency && window.length < maxPending) {
      if (signal?.aborted) return;
      const next = iterator.next();
      if (next.done) {
        exhausted = true;
        return;
      }
      const taskIndex = index;
      index += 1;
      running += 1;
      window.push(
        // Start on a microtask so a synchronous throw in `run` becomes a rejection here.
        Promise.resolve()
          .then(() => run(next.value, taskIndex))
          .then(
            (value) => ({ ok: true as const, value }),
            (error: unknown) => ({ ok: false as const, error }),
          )
          .finally(() => {
            running -= 1;
            wake?.();
          }),
      );
    }
  };

  /** Waits for the head task, starting new tasks whenever any task finishes. */
  const awaitHead = async () => {
    const head = window[0] as (typeof window)[number];
    let headDone = false;
    void head.then(() => {
      headDone = true;
    });
    fill(); // tasks may have finished while the consumer held the last result
    for (;;) {
      await Promise.race([head, new Promise<void>((resolve) => (wake = resolve))]);
      wake = undefined;
      if (headDone) return head;
      fill();
    }
  };

  try {
    fill();
    while (window.length > 0) {
      if (signal?.aborted) throw new RuntimeError('ABORTED', 'load aborted', { reason: signal.reason });
      const settled = await awaitHead();
      window.shift();
      if (!settled.ok) throw settled.error;
      // Refill before yielding: the next reads run while the consumer handles this result.
      fill();
      yield settled.value;
    }
    if (signal?.aborted) throw new RuntimeError('ABORTED', 'load aborted', { reason: signal.reason });
  } finally {
    await Promise.all(window);
  }
}
