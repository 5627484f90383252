#!/usr/bin/env node
// The `splitzip` binary. The only place that touches process.exitCode and signals.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CLI_V8_FLAGS } from './v8-heap-flags.js';

// The build's payloads are large ArrayBuffers on a tiny heap: V8 collects them late, which shows
// as tens to hundreds of MB of RSS. A minor GC after each large write frees them at once (~0.1 ms;
// they die young, so a minor one suffices: measured lower peak RSS than a major one).
// Exposing gc at run time is the documented V8 flag, set before any other code runs, beside a
// smaller old-generation growth (HEAP_GROWING_PERCENT: an s3:// model's SDK garbage).
for (const flag of CLI_V8_FLAGS) setFlagsFromString(flag);
const v8gc = runInNewContext('gc') as ((options?: { type?: 'minor' | 'major' }) => void) | undefined;
const collectGarbage = typeof v8gc === 'function' ? () => v8gc({ type: 'minor' }) : undefined;

// The AWS SDK (s3:// caches) prints a multi-line "Node 20 support ends in 2027" notice once per
// process; on a command line that buries the one-line result. A user's explicit setting wins.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const argv = process.argv.slice(2);
const controller = new AbortController();
// The CLI itself (every command, the store, the codec) is loaded after the signal handlers are set:
// a Ctrl-C while it loaded killed the process (exit 130) without the JSON document --json promises.
const cliModule = import('./run-cli.js');
const jsonModule = import('./render-error-json.js');
// Set once runCli returned: its document (with --json) is out, and a late second signal adds none.
let finished = false;
// Set as runCli starts: a command may have begun work that a second signal stops at once.
let loaded = false;
let interrupts = 0;
const onSignal = (signal: NodeJS.Signals): void => {
  interrupts++;
  // First signal: stop at the next safe point (the cache stays valid either way). Second: now,
  // saying so, and what the command may leave behind (a build's temp files, a gc's orphan blobs
  // and lock) with the command that clears it (once the CLI has loaded, which reads argv for that).
  if (interrupts > 1) {
    // While the CLI loads no command has begun: the first signal stops it before its first step, with
    // its one document (a second here printed another, and cleanup advice for work never done).
    if (!loaded) return;
    void Promise.all([cliModule, jsonModule]).then(([{ describeSecondSignal, readInvocation }, { renderErrorJson }]) => {
      const invocation = readInvocation(argv);
      const message = describeSecondSignal(invocation, signal);
      // On a TTY the progress bar may be mid-line; elsewhere a leading newline was a stray blank line.
      const prefix = invocation.command === undefined ? 'splitzip' : `splitzip ${invocation.command}`;
      process.stderr.write(`${process.stderr.isTTY ? '\n' : ''}${prefix}: ${message}\n`);
      if (invocation.json && !finished) process.stdout.write(renderErrorJson(Object.assign(new Error(message), { code: 'INTERRUPTED', context: { signal } }), message));
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
    return;
  }
  // The reason names the signal: the exit status follows it (130 for SIGINT, 143 for SIGTERM).
  controller.abort(Object.assign(new Error(`interrupted by ${signal}`), { signal }));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

// EPIPE on stdout (e.g. `splitzip inspect c | head`) is not a failure of the command.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

cliModule
  .then(({ runCli }) => {
    loaded = true;
    return runCli(argv, {
      io: { stdout: process.stdout, stderr: process.stderr },
      signal: controller.signal,
      ...(collectGarbage ? { collectGarbage } : {}),
    });
  })
  .then(
    (code) => {
      finished = true;
      process.exitCode = code;
    },
    (error: unknown) => {
      finished = true;
      // runCli renders every error itself; reaching here is a bug in the CLI (or it failed to load).
      process.stderr.write(`splitzip: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
