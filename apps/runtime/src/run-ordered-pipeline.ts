import { RuntimeError } from './errors.js';

export interface OrderedPipelineOptions<T, R> {
  /** Tasks started but not yet taken by the consumer, at most. */
  concurrency: number;
  run: (item: T, index: number) => Promise<R>;
  signal?: AbortSignal;
}

/**
 * Runs `run(item)` over `items` with at most `concurrency` tasks in flight and yields the results
 * in input order. A task's slot in the window frees only when the consumer takes its result, so
 * memory held by finished-but-unconsumed results is bounded too.
 *
 * If a task fails, the error is thrown at that task's position (earlier results are yielded
 * first). Whenever the iteration ends — done, failed, `break`, abort — every started task is
 * awaited before the generator returns, so nothing it owns (staging slots, caller buffers) is
 * still being written after the caller moves on.
 */
export async function* runOrderedPipeline<T, R>(items: Iterable<T>, options: OrderedPipelineOptions<T, R>): AsyncGenerator<R> {
  const { concurrency, run, signal } = options;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new RuntimeError('INVALID_ARGUMENT', 'concurrency must be a positive integer', { concurrency });
  }
  const iterator = items[Symbol.iterator]();
  // Settled-state wrappers so a rejection waiting in the window is never "unhandled".
  const window: Promise<{ ok: true; value: R } | { ok: false; error: unknown }>[] = [];
  let index = 0;
  let exhausted = false;

  const fill = () => {
    while (!exhausted && window.length < concurrency) {
      if (signal?.aborted) return;
      const next = iterator.next();
      if (next.done) {
        exhausted = true;
        return;
      }
      const taskIndex = index;
      index += 1;
      window.push(
        // Start on a microtask so a synchronous throw in `run` becomes a rejection here.
        Promise.resolve()
          .then(() => run(next.value, taskIndex))
          .then(
            (value) => ({ ok: true as const, value }),
            (error: unknown) => ({ ok: false as const, error }),
          ),
      );
    }
  };

  try {
    fill();
    while (window.length > 0) {
      if (signal?.aborted) throw new RuntimeError('ABORTED', 'load aborted', { reason: signal.reason });
      const settled = await (window[0] as (typeof window)[number]);
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
