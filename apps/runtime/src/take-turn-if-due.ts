import * as timers from 'node:timers';

/**
 * setImmediate as it was when this module loaded: a caller's fake timers (vi.useFakeTimers)
 * replace the global and the timers module's export later, and an immediate scheduled through
 * them never ran once real timers were back.
 */
const scheduleImmediate = timers.setImmediate;

/**
 * Continuous work a load does on the loading thread before it lets the event loop turn (timers,
 * I/O callbacks, the host's own setImmediate callbacks), in milliseconds.
 *
 * Why it is needed: most of a load's steps settle at once (synchronous reads of small blobs and of
 * paced pieces, inline decodes, a paced link's deadlines already passed on a busy CPU), so each
 * tensor's next step ran as a microtask, and the tensors in flight handed the thread to each other
 * without ever returning to the event loop: two to five concurrent loads of the default model held
 * it 60-445 ms with 0-4 turns (a host's 1 ms interval never fired, AbortSignal.timeout(5) fired
 * when the loads ended), and a load's `ioMs` counted the other tensors' decodes.
 *
 * Why 2 ms: a host's timers have 1 ms granularity, so a turn every 2 ms (plus the one step each
 * tensor in flight had started, at most one ~1 ms inline decode or 1 MiB read) keeps its timers
 * within a few milliseconds of due; a turn costs the load ~5-20 µs (one poll of the event loop),
 * well under 1 % of 2 ms. A load that waits for I/O turns anyway and never reaches the budget.
 */
export const EVENT_LOOP_TURN_BUDGET_MS = 2;

/**
 * A turn asked for this long ago that has not come was lost, not late: every await of the load
 * lets the loop turn, so the immediate fires within one iteration. Its waiters are let go and a
 * new stretch begins (a load that waited on it hung, and so did every later load in the process).
 */
const LOST_TURN_MS = 1000;

/** When the current stretch of work began: the first check since the event loop last turned (undefined: it has turned). */
let stretchStartMs: number | undefined;
/** Settles in the next check phase of the event loop, which also marks the stretch over. */
let nextTurn: Promise<void> | undefined;
/** Settles nextTurn (kept to let its waiters go if its immediate never runs). */
let endTurn: (() => void) | undefined;

/**
 * A promise of the event loop's next turn when the work since its last turn has reached
 * EVENT_LOOP_TURN_BUDGET_MS, else undefined: carry on at once (a caller awaits only when given a
 * promise, so a load that is not due keeps its order and its microtask depth). Process-wide: every
 * load in the process counts toward one stretch, and all of them wait for the same turn once it is
 * due. Call it right before each step of work on this thread, and again after the turn, with
 * nothing in between (`for (let turn = takeTurnIfDue(); turn; turn = takeTurnIfDue()) await turn;`):
 * every step that waited resumes after the same turn, and a verdict given before another step
 * runs is stale (checked a hop early, all 40 steps of a simulated load ran back to back after
 * each turn, 20 ms with a budget of 2).
 */
export function takeTurnIfDue(): Promise<void> | undefined {
  const nowMs = performance.now();
  if (stretchStartMs !== undefined && nowMs - stretchStartMs >= LOST_TURN_MS) endTurn?.();
  if (stretchStartMs === undefined || nextTurn === undefined) {
    stretchStartMs = nowMs;
    let settled = false;
    const end = (): void => {
      if (settled) return;
      settled = true;
      if (endTurn === end) {
        stretchStartMs = undefined;
        nextTurn = undefined;
        endTurn = undefined;
      }
      resolveTurn();
    };
    let resolveTurn!: () => void;
    nextTurn = new Promise<void>((resolve) => {
      resolveTurn = resolve;
    });
    endTurn = end;
    // setImmediate runs after the event loop's timers and I/O polling: when it fires, the loop has
    // turned, whether or not anyone waited for it.
    scheduleImmediate(end);
    return undefined;
  }
  return nowMs - stretchStartMs >= EVENT_LOOP_TURN_BUDGET_MS ? nextTurn : undefined;
}
