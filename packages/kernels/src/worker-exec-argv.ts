// Node options for worker threads started from a file (the kernels' decode workers, the builder's
// hash workers, the runtime's decode threads).

/**
 * The process's `execArgv` without `--input-type`: a worker inherits its parent's options, and
 * that one (which only applies to `--eval` and STDIN input) makes a worker started from a file fail
 * ("--input-type can only be used with string input"), so a library called from
 * `node --input-type=module -e …` lost every worker. Pass it as the Worker's `execArgv`.
 */
export function workerExecArgv(): string[] {
  const args: string[] = [];
  const given = process.execArgv;
  for (let i = 0; i < given.length; i++) {
    const arg = given[i]!;
    if (arg === '--input-type') i++; // its value is the next argument
    else if (!arg.startsWith('--input-type=')) args.push(arg);
  }
  return args;
}
