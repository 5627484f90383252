import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Worker } from 'node:worker_threads';
import { startWorker } from '@splitzip/kernels/start-worker';

/**
 * Why a helper thread: Node's timers count whole milliseconds from the event loop's cached time, so
 * a 1.7 ms timer fired 0.6 ms early or up to 1 ms late here (a paced read ended before the link had
 * delivered it, or sat delivered for up to a millisecond: ±0.5 ms on a load's last read), and
 * checking the clock on every event-loop turn instead (setImmediate) ends on time but spins the
 * loading thread whenever a deadline is near — through most of a paced load (3.5 → 10-14 ms of CPU
 * per 14 ms load of the default model). The thread sleeps in `Atomics.wait` until the earliest
 * deadline (a futex with a sub-millisecond timeout) and posts one message when it passes: waits of
 * 10 ms ended 10-50 µs late, never early, and the thread itself sleeps (0.1 of a core on 400 waits
 * of 0.2-4.2 ms, against 0.3 for setImmediate checks).
 */
export const TIMER_THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const control = new Int32Array(workerData, 0, 1);
const delay = new Float64Array(workerData, 8, 1);
// Read before saying ready: the main thread hands its first deadline over as soon as it hears it,
// and a thread preempted between the two (the message's wake-up of the main thread can do that on
// a busy machine) would otherwise count that hand-over as already seen and sleep for good.
let seen = Atomics.load(control, 0);
// The deadline on this thread's clock (0: none). The main thread hands over a delay, not an instant
// (the threads' time origins need not agree): counted from when it is read here, never early.
let atMs = 0;
parentPort.postMessage('ready');
for (;;) {
  const now = Atomics.load(control, 0);
  if (now !== seen) {
    seen = now;
    atMs = delay[0] > 0 ? performance.now() + delay[0] : 0;
  }
  if (atMs === 0) {
    Atomics.wait(control, 0, seen);
    continue;
  }
  const remainingMs = atMs - performance.now();
  if (remainingMs <= 0) {
    atMs = 0;
    parentPort.postMessage(0);
    continue;
  }
  Atomics.wait(control, 0, seen, remainingMs);
}
`;

/** Deadlines closer than this are left to event-loop turns (a hand-over and a message take longer). */
const SKEW_MS = 0.05;

interface Waiter {
  atMs: number;
  wake: () => void;
}

interface TimerThread {
  worker: Worker;
  control: Int32Array;
  /** How long from now the earliest deadline is, in ms, as last handed over (0: none). */
  delay: Float64Array;
  /** The thread runs (it said so): until then, waits take timers (its start took ~70 ms here). */
  ready: boolean;
}

// Pending waits of the process, earliest first, and what is armed for the head.
const waiters: Waiter[] = [];
let thread: TimerThread | undefined;
let threadFailed = false;
// The deadline the thread was last given (0: none, or it has answered).
let armedAtMs = 0;
// The thread is ref'd (keeps the process alive) while a wait is pending.
let held = false;
let fallbackTimer: NodeJS.Timeout | undefined;
let turning = false;

function startThread(): TimerThread | undefined {
  if (thread !== undefined || threadFailed) return thread;
  try {
    const shared = new SharedArrayBuffer(16);
    const worker = startWorker(TIMER_THREAD_SOURCE, { eval: true, workerData: shared });
    worker.on('message', (message: unknown) => {
      if (message === 'ready' && thread !== undefined) thread.ready = true;
      armedAtMs = 0; // answered (or just started): the next deadline must be handed over again
      wakeDue();
    });
    const fail = () => {
      threadFailed = true;
      thread = undefined;
      held = false;
      wakeDue();
    };
    worker.on('error', fail);
    worker.on('exit', fail);
    // Kept alive only while a wait is pending (see hold); after the listeners, as adding a
    // 'message' listener refs the worker again.
    worker.unref();
    thread = { worker, control: new Int32Array(shared, 0, 1), delay: new Float64Array(shared, 8, 1), ready: false };
  } catch {
    threadFailed = true;
  }
  return thread;
}

/** Refs the thread while a wait is pending, so the process lives until it ends (a timer would, too). */
function hold(helper: TimerThread, pending: boolean): void {
  if (pending === held) return;
  held = pending;
  if (pending) helper.worker.ref();
  else helper.worker.unref();
}

/**
 * Wakes every waiter whose deadline has passed, then hands the next deadline to the thread (once:
 * a timer per hand-over and a futex wake per call cost the loading thread ~1 ms of a paced load).
 */
function wakeDue(): void {
  const nowMs = performance.now();
  while (waiters.length > 0 && (waiters[0] as Waiter).atMs <= nowMs) (waiters.shift() as Waiter).wake();
  if (fallbackTimer !== undefined) clearTimeout(fallbackTimer);
  fallbackTimer = undefined;
  const head = waiters[0];
  const started = startThread();
  const helper = started?.ready === true ? started : undefined;
  if (helper === undefined) {
    // No thread (yet): timers, then event-loop turns for the last millisecond.
    if (head === undefined) return;
    const remainingMs = head.atMs - nowMs;
    if (remainingMs >= 2) fallbackTimer = setTimeout(wakeDue, remainingMs - 1);
    else turnUntilDue();
    return;
  }
  hold(helper, head !== undefined);
  if (head === undefined) return;
  if (head.atMs - nowMs < SKEW_MS) {
    // Too close to hand over: the remaining microseconds on event-loop turns.
    turnUntilDue();
    return;
  }
  if (head.atMs === armedAtMs) return;
  armedAtMs = head.atMs;
  helper.delay[0] = head.atMs - nowMs;
  Atomics.add(helper.control, 0, 1);
  Atomics.notify(helper.control, 0);
}

function turnUntilDue(): void {
  if (turning) return;
  turning = true;
  void nextTurn().then(() => {
    turning = false;
    wakeDue();
  });
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
