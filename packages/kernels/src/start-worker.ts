// Worker threads for this package and the others (the builder's hash workers and backend probe,
// the runtime's decode threads and timer thread), started with the Node options they can run under.
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * `new Worker(source, options)`, where the process runs with `--input-type` (in its arguments or in
 * NODE_OPTIONS) without it. A worker inherits its parent's options, and that one (which only
 * applies to `--eval` and STDIN input) made a worker started from a file fail ("--input-type can
 * only be used with string input") and an eval worker's CommonJS source run as a module ("require
 * is not defined"), so a library called from `node --input-type=module -e …` lost every worker.
 * Without `--input-type` the options are inherited as before, untouched (Node itself then leaves
 * out the per-process ones).
 */
export function startWorker(source: string | URL, options: WorkerOptions = {}): Worker {
  const fromEnv = withoutInputType(splitNodeOptions(process.env.NODE_OPTIONS));
  // Set in NODE_OPTIONS, it reaches the worker through its environment, execArgv or not.
  const settings = fromEnv === undefined ? options : { ...options, env: { ...process.env, NODE_OPTIONS: fromEnv.join(' ') } };
  const execArgv = withoutInputType(process.execArgv);
  if (execArgv === undefined) return new Worker(source, settings);
  try {
    return new Worker(source, { ...settings, execArgv });
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw error;
    // Per-process options (--title, --v8-pool-size, V8 flags) are refused in a given list, and left
    // out when inherited: left out here too, with their values, as Node names them.
    const kept = withoutRefused(execArgv, (error as Error).message);
    if (kept === undefined) throw error;
    return new Worker(source, { ...settings, execArgv: kept });
  }
}

/** `args` without `--input-type` in either form; undefined when it has none. */
export function withoutInputType(args: readonly string[]): string[] | undefined {
  if (!args.some((arg) => arg === '--input-type' || arg.startsWith('--input-type='))) return undefined;
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--input-type') i++; // its value is the next argument
    else if (!arg.startsWith('--input-type=')) kept.push(arg);
  }
  return kept;
}

/**
 * `args` without the options Node's ERR_WORKER_INVALID_EXEC_ARGV message lists ("… flags: --a,
 * --b=x"), each with its value where that is the next argument (a bare word in execArgv is always
 * an option's value: left behind, it ended the worker's option parsing and lost every option after
 * it). Undefined when the message names none of them.
 */
export function withoutRefused(args: readonly string[], message: string): string[] | undefined {
  const list = /flags: (.*)$/s.exec(message)?.[1];
  if (list === undefined) return undefined;
  // Matched against the whole list, not split on ", ": a value may hold one ("--title=a, b").
  const named = (arg: string): boolean => list === arg || list.startsWith(`${arg}, `) || list.endsWith(`, ${arg}`) || list.includes(`, ${arg}, `);
  const kept: string[] = [];
  let refused = 0;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!named(arg)) {
      kept.push(arg);
      continue;
    }
    refused++;
    const next = args[i + 1];
    if (!arg.includes('=') && next !== undefined && !next.startsWith('-')) i++;
  }
  return refused > 0 ? kept : undefined;
}

/** NODE_OPTIONS as arguments (space-separated; Node's quoting of values with spaces is not needed for the flags looked at here). */
function splitNodeOptions(value: string | undefined): string[] {
  return value === undefined ? [] : value.split(/\s+/).filter((part) => part.length > 0);
}
