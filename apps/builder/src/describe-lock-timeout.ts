import { dirname } from 'node:path';
import { UNPARSEABLE_LOCK_STALE_MS } from '@splitzip/store';
import { quoteForShell } from './quote-for-shell.js';

// The store words LOCK_TIMEOUT for library callers ("open the store with a longer lockTimeoutMs");
// a CLI user has no such option, and needs the command to run or the process to check.

interface LockTimeoutDetails {
  holder?: { pid?: unknown; host?: unknown; pidNamespace?: unknown } | null;
  holderState?: unknown;
  timeoutMs?: unknown;
}

/**
 * The CLI's line for the store's LOCK_TIMEOUT at `lockPath` (`details`: holder, holderState,
 * timeoutMs): who holds the lock and where, the wait once and in seconds, and the next step for
 * where the holder is. Undefined where the details are not the store's (its message is kept then).
 */
export function describeLockTimeout(lockPath: string, details: LockTimeoutDetails): string | undefined {
  const { holder, holderState, timeoutMs } = details;
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs)) return undefined;
  const cache = dirname(lockPath);
  const waited = `after waiting ${formatSeconds(timeoutMs)}`;
  // Every writer takes over the lock of a dead holder of this host at once; gc removes it too.
  // Quoted as every command to copy is: a cache path with a space split into two arguments.
  const retry = `run this again (\`splitzip gc ${quoteForShell(cache)}\` removes a dead holder's lock)`;
  if (holderState === 'unparseable') {
    const head = `LOCK_TIMEOUT: gave up ${waited} for the writer lock of ${cache}: its lock file names no holder (damaged, or not a writer's)`;
    // The wait outlasted the age at which such a lock is taken over (the CLI's 30 s against 10 s), so
    // it never reached that age: "run this again" gave the same line for ever (a future mtime).
    if (timeoutMs > UNPARSEABLE_LOCK_STALE_MS) {
      return (
        `${head} and stayed younger than ${formatSeconds(UNPARSEABLE_LOCK_STALE_MS)}, the age at which it is taken over, all that time: its modification time is ahead of this host's clock, ` +
        `or something keeps rewriting it; if no build or gc of this cache is running, remove ${lockPath} by hand`
      );
    }
    return `${head}; it is taken over once ${formatSeconds(UNPARSEABLE_LOCK_STALE_MS)} old: ${retry}`;
  }
  if (holder === null || holder === undefined || typeof holder.pid !== 'number' || typeof holder.host !== 'string') return undefined;
  const who = `pid ${holder.pid} on ${holder.host}`;
  const stem = `LOCK_TIMEOUT: gave up ${waited} for the writer lock of ${cache}, held by ${who}`;
  // A holder whose pid cannot be checked from here: nothing takes its lock over, gc neither.
  const byHand = `if it still runs, let it finish and run this again; if it is gone, remove ${lockPath} by hand (neither a writer nor \`splitzip gc\` takes over such a lock)`;
  switch (holderState) {
    case 'running':
      return (
        `${stem} (this host; a live process: another build, gc or loader of this cache, or a stopped or hung one: \`ps -p ${holder.pid}\`); ` +
        `let it finish, or end it, then ${retry}`
      );
    case 'stopped':
      // Stopped, it never finishes: "let it finish" waited for ever.
      return (
        `${stem} (this host; a stopped process: job control (Ctrl-Z) or SIGSTOP, so it never releases the lock); ` +
        `resume it with \`kill -CONT ${holder.pid}\` or end it, then run this again`
      );
    case 'traced':
      // Held by a debugger (state t): SIGCONT does not resume it, only its tracer can.
      return `${stem} (this host; held by a debugger (traced), so it never releases the lock); continue it in the debugger, or end it, then run this again`;
    case 'other-host':
      return `${stem} (another host: its pid cannot be checked from here): ${byHand}`;
    case 'other-pid-namespace':
      return `${stem} (another pid namespace of this host: a container sharing this cache, whose pid cannot be checked from here): ${byHand}`;
    default:
      return undefined;
  }
}

/** `30 s`, `1.5 s`: the CLI's waits in seconds. */
function formatSeconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(1))} s`;
}
