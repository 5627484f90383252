import { isStoreError } from '@splitzip/store';
import packageJson from '../package.json';
import { buildCommand } from './commands/build.js';
import { gcCommand } from './commands/gc.js';
import { inspectCommand } from './commands/inspect.js';
import { statsCommand } from './commands/stats.js';
import { verifyCommand } from './commands/verify.js';
import type { CommandDef, CommandIo } from './define-command.js';
import { describeError } from './describe-error.js';
import { BuilderError, UsageError } from './errors.js';
import { interruptedError } from './throw-if-interrupted.js';
import { DEBUG_FLAG, findGlobalFlags, parseCommandArgs } from './parse-command-args.js';
import { BINARY_NAME, renderCommandHelp, renderMainHelp } from './render-command-help.js';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
/** 128 + SIGINT, the shell convention for "stopped by Ctrl-C". */
export const EXIT_INTERRUPTED = 130;
/** 128 + SIGTERM. */
export const EXIT_TERMINATED = 143;

export const VERSION: string = packageJson.version;

// Declared as the widest CommandDef: each command keeps its precise arg types inside its own file.
export const COMMANDS = [buildCommand, verifyCommand, inspectCommand, statsCommand, gcCommand] as unknown as readonly CommandDef[];

export interface RunCliOptions {
  io: CommandIo;
  signal?: AbortSignal | undefined;
  collectGarbage?: (() => void) | undefined;
}

/**
 * The whole CLI as a function: parses argv, runs one command, renders errors as one line, and
 * returns the exit status. It never calls process.exit; `cli.ts` sets the exit code.
 */
export async function runCli(argv: readonly string[], options: RunCliOptions): Promise<number> {
  const { io } = options;
  const signal = options.signal ?? new AbortController().signal;
  // `--debug` before the command too (`splitzip --debug build …`).
  const leadingDebug = argv[0] === DEBUG_FLAG;
  const words = leadingDebug ? argv.slice(1) : argv;

  const first = words[0];
  if (first === undefined) {
    io.stderr.write(renderMainHelp(COMMANDS, VERSION));
    return EXIT_USAGE;
  }
  if (first === '--version' || first === '-v') {
    io.stdout.write(`${VERSION}\n`);
    return EXIT_OK;
  }
  // `splitzip --help build` and `splitzip help build` are the same as `splitzip build --help`.
  const isHelpWord = (word: string | undefined) => word === '--help' || word === '-h' || word === 'help';
  const helpFirst = isHelpWord(first);
  const commandName = helpFirst ? words[1] : first;
  const command = COMMANDS.find((c) => c.name === commandName);
  // `splitzip help`, and `splitzip help help` / `--help --help`: the main help.
  if (helpFirst && !command && (commandName === undefined || isHelpWord(commandName))) {
    io.stdout.write(renderMainHelp(COMMANDS, VERSION));
    return EXIT_OK;
  }
  if (!command) {
    // `splitzip --jobs 2 build …`: options follow the command; say so rather than "unknown command".
    const optionFirst = commandName?.startsWith('-') === true && words.some((word) => COMMANDS.some((c) => c.name === word));
    const hint = optionFirst ? `options go after the command: ${BINARY_NAME} <command> [arguments] [options]` : `Run '${BINARY_NAME} --help' for the commands.`;
    io.stderr.write(`${BINARY_NAME}: unknown command '${commandName}'\n${hint}\n`);
    return EXIT_USAGE;
  }
  const flags = findGlobalFlags(command, words.slice(1));
  const debug = leadingDebug || flags.debug;
  if (helpFirst || flags.help) {
    io.stdout.write(renderCommandHelp(command));
    return EXIT_OK;
  }
  // A global option, listed as such by the main help: after a command too.
  if (flags.version) {
    io.stdout.write(`${VERSION}\n`);
    return EXIT_OK;
  }

  try {
    const args = parseCommandArgs(command, words.slice(1));
    return await command.run({ args, io, signal, ...(options.collectGarbage ? { collectGarbage: options.collectGarbage } : {}) });
  } catch (caught) {
    // The store abandoned its S3 requests at the signal (ABORTED): an interrupt, said as every command says it.
    const error = signal?.aborted && isStoreError(caught) && caught.code === 'ABORTED' ? interruptedError(signal) : caught;
    if (error instanceof UsageError) {
      io.stderr.write(`${BINARY_NAME} ${command.name}: ${error.message}\nRun '${BINARY_NAME} ${command.name} --help' for usage.\n`);
      return EXIT_USAGE;
    }
    io.stderr.write(`${BINARY_NAME} ${command.name}: error: ${describeError(error)}\n`);
    if (debug && error instanceof Error && error.stack) io.stderr.write(`${error.stack}\n`);
    if (error instanceof BuilderError && error.code === 'INTERRUPTED') return error.context.signal === 'SIGTERM' ? EXIT_TERMINATED : EXIT_INTERRUPTED;
    return EXIT_FAILURE;
  }
}
