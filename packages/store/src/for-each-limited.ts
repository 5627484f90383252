// Runs a task over indices with a few at once and hands their ends back in index order: what a
// sequential loop checking each index in turn reports, in its order, with the waits overlapped.

/**
 * Runs `task(i)` for i = 0 … count - 1, started in order, at most `limit` at once (1 for a `limit`
 * that is no positive integer), and calls `onDone(i)` in index order, once task i and every task
 * before it have ended. `signal` is checked where a loop would check it before index i: right
 * after onDone(i - 1) (before anything, for 0); once it is found aborted no task starts, no onDone
 * is called, and the tasks running are waited for before rejecting with the signal's reason. A
 * task or onDone that throws ends it the same way, with its error. Nothing runs on once the
 * promise settles.
 */
export function forEachLimited(count: number, limit: number, task: (index: number) => Promise<void>, onDone: (index: number) => void, signal?: AbortSignal): Promise<void> {
  const most = Number.isSafeInteger(limit) && limit > 0 ? limit : 1;
  return new Promise((resolve, reject) => {
    const ended = new Uint8Array(count);
    let next = 0;
    let running = 0;
    /** Indices below it have had their onDone. */
    let delivered = 0;
    let failure: { error: unknown } | undefined;
    const fail = (error: unknown): void => {
      failure ??= { error };
    };
    const settle = (): void => {
      if (running > 0) return;
      if (failure !== undefined) reject(failure.error);
      else if (delivered === count) resolve();
    };
    const deliver = (): void => {
      while (failure === undefined && delivered < count && ended[delivered] === 1) {
        try {
          onDone(delivered);
        } catch (error) {
          fail(error);
          return;
        }
        delivered++;
        // The check a loop makes before its next index (none after the last).
        if (delivered < count && signal?.aborted === true) fail(signal.reason);
      }
    };
    const start = (): void => {
      while (failure === undefined && running < most && next < count) {
        if (signal?.aborted === true) {
          // Index `next`'s check is due now only when every index before it is delivered; else a
          // delivery makes it (deliver) once those end.
          if (delivered === next) fail(signal.reason);
          return;
        }
        const index = next++;
        running++;
        let promise: Promise<void>;
        try {
          promise = task(index);
        } catch (error) {
          promise = Promise.reject(error);
        }
        promise.then(
          () => {
            running--;
            ended[index] = 1;
            deliver();
            start();
            settle();
          },
          (error: unknown) => {
            running--;
            fail(error);
            settle();
          },
        );
      }
    };
    start();
    settle();
  });
}
