// The LOCK_TIMEOUT a writer gets after waiting lockTimeoutMs for another holder's lock: who holds
// it, in human units how long this waited, and what to do next, which depends on where the holder is.
import { hostname } from 'node:os';
import { StoreError } from './errors.js';
import { formatAge } from './format-age.js';
import { UNPARSEABLE_LOCK_STALE_MS } from './limits.js';
import { readPidHeldState, type LockHolder, type ProcessHeldState } from './write-lock.js';

/**
 * Why the holder's lock was not taken over (`details.holderState`): `running` (this host's live
 * process), `stopped` (this host's live process, stopped: SIGSTOP, Ctrl-Z; state T in
 * /proc/<pid>/stat, so Linux only: `running` where that cannot be read), `traced` (this host's live
 * process held by a debugger: state t, which SIGCONT does not resume), `other-host`,
 * `other-pid-namespace` (a container sharing the host name), `unparseable` (no holder named, taken
 * over once UNPARSEABLE_LOCK_STALE_MS old).
 */
export type LockHolderState = 'running' | 'stopped' | 'traced' | 'other-host' | 'other-pid-namespace' | 'unparseable';

/** How long to wait longer: the option, since the CLI has no flag for it. */
const WAIT_LONGER = 'or open the store with a longer lockTimeoutMs';

/**
 * LOCK_TIMEOUT for the lock at `path` held by `holder` (undefined: unparseable) after `waitedMs`
 * of waiting (more than `timeoutMs`). `foreignNamespace`: the holder's pid namespace is not ours.
 * `heldState`: this host's holder's stopped/traced state, read from /proc when not given (tests).
 */
export function lockTimeoutError(
  path: string,
  holder: LockHolder | undefined,
  options: { timeoutMs: number; waitedMs: number; foreignNamespace: boolean; heldState?: ProcessHeldState | null },
): StoreError {
  const { timeoutMs, waitedMs, foreignNamespace } = options;
  // The host first, as isHolderDead judges it: a holder in a container of another host has a pid
  // namespace unlike ours too, and was said to be in "another pid namespace of this host".
  // A stopped holder keeps its lock for ever (it is alive): "wait for it to finish" never ends.
  const holderState: LockHolderState =
    holder === undefined
      ? 'unparseable'
      : holder.host !== hostname()
        ? 'other-host'
        : foreignNamespace
          ? 'other-pid-namespace'
          : ((options.heldState === undefined ? readPidHeldState(holder.pid) : options.heldState) ?? 'running');
  const waited = `for more than ${formatAge(timeoutMs)}`;
  const removeByHand = `if that writer is gone, remove ${path} by hand (no writer ever breaks such a lock; \`splitzip gc\` neither)`;
  let message: string;
  switch (holderState) {
    case 'unparseable':
      message =
        `the lock is held ${waited} by a lock file that names no holder (damaged, or not a writer's): ` +
        `it is taken over once ${formatAge(UNPARSEABLE_LOCK_STALE_MS)} old; try again then, ${WAIT_LONGER}`;
      break;
    case 'other-pid-namespace':
      message =
        `the lock is held by pid ${holder!.pid} on ${holder!.host} ${waited} (in another pid namespace of this host, ${holder!.pidNamespace}: ` +
        `a container sharing this cache; its pid cannot be checked from here): ${removeByHand}; if it is still running, wait for it to finish, ${WAIT_LONGER}`;
      break;
    case 'other-host':
      message =
        `the lock is held by pid ${holder!.pid} on ${holder!.host} ${waited} (another host: its pid cannot be checked from here, so its lock is never taken over): ` +
        `${removeByHand}, the host down or the process crashed there; if it is still running, wait for it to finish, ${WAIT_LONGER}`;
      break;
    case 'stopped':
      message =
        `the lock is held by pid ${holder!.pid} on ${holder!.host} (this host) ${waited}, and that process is stopped (job control or SIGSTOP), ` +
        `so it never releases the lock: resume it with \`kill -CONT ${holder!.pid}\` or end it, and try again ` +
        '(a process ended or killed leaves a lock the next writer takes over at once)';
      break;
    case 'traced':
      // SIGCONT does not resume a traced process: only its tracer can.
      message =
        `the lock is held by pid ${holder!.pid} on ${holder!.host} (this host) ${waited}, and that process is held by a debugger (traced), ` +
        'so it never releases the lock: continue it in the debugger, or end it, and try again ' +
        '(a process ended or killed leaves a lock the next writer takes over at once)';
      break;
    case 'running':
      message =
        `the lock is held by pid ${holder!.pid} on ${holder!.host} (this host) ${waited}, and that process is running: ` +
        'another build, gc or loader writing to this cache, or a stopped or hung process; wait for it to finish and try again ' +
        `(a process ended or killed leaves a lock the next writer takes over at once), ${WAIT_LONGER}`;
      break;
  }
  return new StoreError('LOCK_TIMEOUT', message, { path, details: { holder, holderState, timeoutMs, waitedMs } });
}
