import { setImmediate as nextTurn } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';

/**
 * Why a helper thread: Node's timers count whole milliseconds from the event loop's cached time, so
 * a 1.7 ms timer fired 0.6 ms early or up to 1 ms late here (a paced read ended before the link had
 * delivered it, or sat delivered for up to a millisecond: ±0.5 ms on a load's last read), and
 * checking the clock on every event-loop turn instead (setImmediate) ends on time but spins the
 * loading thread whenever a deadline is near — through most of a paced load (3.5 → 10-14 ms of CPU
 * per 14 ms load of the default model). The thread sleeps in `Atomics.wait` until the earliest
 * deadline (a futex with a sub-millisecond timeout) and posts one message when it passes: 400 waits
 * of 0.2-4.2 ms on the busy 2-core box ended 0.18-0.20 ms late (median), never early, at 0.1 of a
 * core against 0.3 for setImmediate checks.
 */
const TIMER_THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const control = new Int32Array(workerData, 0, 1);
const deadline = new Float64Array(workerData, 8, 1);
for (;;) {
  const seen = Atomics.load(control, 0);
  const atMs = deadline[0];
  const remainingMs = atMs > 0 ? atMs - (performance.timeOrigin + performance.now()) : Infinity;
  // Passed: say so once, then sleep until the main thread arms the next deadline.
  if (remainingMs <= 0) parentPort.postMessage(0);
  Atomics.wait(control, 0, seen, remainingMs <= 0 ? Infinity : remainingMs);
}
`;

/** Left to event-loop turns: what the two threads' clocks may disagree by, and less. */
const SKEW_MS = 0.05;

interface Waiter {
  atMs: number;
  wake: () => void;
}

interface TimerThread {
  worker: Worker;
  control: Int32Array;
  /** The earliest deadline on the shared time line (`performance.timeOrigin + now`), 0: none. */
  deadline: Float64Array;
}

// Pending waits of the process, earliest first, and what is armed for the head.
const waiters: Waiter[] = [];
let thread: TimerThread | undefined;
let threadFailed = false;
let backstop: NodeJS.Timeout | undefined;
let turning = false;

function startThread(): TimerThread | undefined {
  if (thread !== undefined || threadFailed) return thread;
  try {
    const shared = new SharedArrayBuffer(16);
    const worker = new Worker(TIMER_THREAD_SOURCE, { eval: true, workerData: shared });
    worker.on('message', wakeDue);
    const fail = () => {
      threadFailed = true;
      thread = undefined;
      wakeDue();
    };
    worker.on('error', fail);
    worker.on('exit', fail);
    // Never keeps the process alive (the backstop timer does while a wait is pending); after the
    // listeners, as adding a 'message' listener refs the worker again.
    worker.unref();
    thread = { worker, control: new Int32Array(shared, 0, 1), deadline: new Float64Array(shared, 8, 1) };
  } catch {
    threadFailed = true;
  }
  return thread;
}

/** Wakes every waiter whose deadline has passed, then arms the thread (and a backstop timer) for the next. */
function wakeDue(): void {
  const nowMs = performance.now();
  while (waiters.length > 0 && (waiters[0] as Waiter).atMs <= nowMs) (waiters.shift() as Waiter).wake();
  if (backstop !== undefined) clearTimeout(backstop);
  backstop = undefined;
  const head = waiters[0];
  const helper = startThread();
  if (head === undefined) {
    if (helper !== undefined) helper.deadline[0] = 0;
    return;
  }
  const remainingMs = head.atMs - nowMs;
  if (remainingMs < SKEW_MS || helper === undefined) {
    // Too close to hand over (or no thread): the remaining microseconds on event-loop turns; without
    // a thread, timers and then turns for the last millisecond.
    if (helper === undefined && remainingMs >= 2) {
      backstop = setTimeout(wakeDue, remainingMs - 1);
    } else if (!turning) {
      turning = true;
      void nextTurn().then(() => {
        turning = false;
        wakeDue();
      });
    }
    return;
  }
  helper.deadline[0] = performance.timeOrigin + head.atMs;
  Atomics.add(helper.control, 0, 1);
  Atomics.notify(helper.control, 0);
  // Keeps the process alive while the wait is pending, and wakes it should the thread not.
  backstop = setTimeout(wakeDue, remainingMs + 2);
}

/**
 * Resolves once `performance.now()` has reached `deadlineMs`, never before and, on a machine with
 * a core to spare, a fraction of a millisecond after (see TIMER_THREAD_SOURCE's comment): one
 * process-wide helper thread wakes the event loop for the earliest pending deadline.
 */
export function waitUntil(deadlineMs: number): Promise<void> {
  if (!(deadlineMs > performance.now())) return Promise.resolve();
  return new Promise<void>((wake) => {
    let at = waiters.length;
    while (at > 0 && (waiters[at - 1] as Waiter).atMs > deadlineMs) at -= 1;
    waiters.splice(at, 0, { atMs: deadlineMs, wake });
    if (at === 0) wakeDue();
  });
}
