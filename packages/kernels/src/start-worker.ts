// Worker threads for this package and the others (the builder's hash workers and backend probe,
// the runtime's decode threads and timer thread), started with the Node options they can run under.
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * `new Worker(source, options)`, where the process runs with `--input-type` without it. A worker
 * inherits its parent's options, and that one (which only applies to `--eval` and STDIN input)
 * made a worker started from a file fail ("--input-type can only be used with string input") and
 * an eval worker's CommonJS source run as a module ("require is not defined"), so a library
 * called from `node --input-type=module -e …` lost every worker. Without `--input-type` the
 * options are inherited as before (untouched: Node itself then leaves out the per-process ones).
 */
export function startWorker(source: string | URL, options: WorkerOptions = {}): Worker {
  const execArgv = withoutInputType(process.execArgv);
  if (execArgv === undefined) return new Worker(source, options);
  try {
    return new Worker(source, { ...options, execArgv });
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw error;
    // Per-process options (--max-old-space-size, --expose-gc, V8 flags) are refused in a given
    // list, and left out when inherited: left out here too, as Node names them.
    const refused = new Set(/flags: (.*)$/.exec((error as Error).message)?.[1]?.split(', ') ?? []);
    return new Worker(source, { ...options, execArgv: refused.size > 0 ? execArgv.filter((arg) => !refused.has(arg)) : [] });
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
