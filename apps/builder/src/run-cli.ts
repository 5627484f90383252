import { findClosestName } from '@splitzip/codec/internal';
import { isStoreError } from '@splitzip/store';
import packageJson from '../package.json';
import { buildCommand } from './commands/build.js';
import { gcCommand } from './commands/gc.js';
import { inspectCommand } from './commands/inspect.js';
import { statsCommand } from './commands/stats.js';
import { verifyCommand } from './commands/verify.js';
import type { CommandDef, CommandIo } from './define-command.js';
import { describeError } from './describe-error.js';
import { BuilderError, isBuilderError, UsageError } from './errors.js';
import { renderErrorJson } from './render-error-json.js';
import { quoteForShell } from './quote-for-shell.js';
import { showLines } from './show-name.js';
import { interruptedError, throwIfInterrupted } from './throw-if-interrupted.js';
import { wrapCacheWriteError } from './wrap-build-error.js';
import { DEBUG_FLAG, findGlobalFlags, findJsonRequest, findLeadingJsonRequest, parseCommandArgs } from './parse-command-args.js';
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

  // With --json, stdout holds exactly one JSON document on every exit, these before a command too:
  // the version, help (its text on stderr), no command, an unknown one (stdout was empty or text).
  // No command's spec is known here, so any `--json` word asks (findLeadingJsonRequest).
  const mainJson = findLeadingJsonRequest(words);
  const usageBeforeCommand = (message: string, hint: string): number => {
    if (mainJson) io.stdout.write(renderErrorJson(new UsageError(message), message));
    io.stderr.write(`${BINARY_NAME}: ${message}\n${hint}\n`);
    return EXIT_USAGE;
  };
  // The words that choose the path here, without the global flags (`--json --version`, `help build --json`).
  const mainWords = words.filter((word) => !isGlobalWord(word));
  if (mainWords.length === 0) {
    io.stderr.write(renderMainHelp(COMMANDS, VERSION));
    if (mainJson) io.stdout.write(renderErrorJson(new BuilderError('USAGE', 'missing command', { commands: COMMANDS.map((c) => c.name) }), 'missing command'));
    return EXIT_USAGE;
  }
  if (isVersionWord(mainWords[0])) return writeVersion(io, mainJson);
  const first = words[0]!;
  // `splitzip --help build` and `splitzip help build` are the same as `splitzip build --help`.
  const helpFirst = isHelpWord(mainWords[0]);
  const commandName = helpFirst ? mainWords[1] : first;
  const command = findCommand(commandName);
  // `splitzip help`, and `splitzip help help` / `--help --help`: the main help.
  if (helpFirst && !command && (commandName === undefined || isHelpWord(commandName))) return writeHelp(io, renderMainHelp(COMMANDS, VERSION), mainJson);
  if (!command) {
    const { message, hint } = describeUnknownCommand(commandName!, words);
    return usageBeforeCommand(message, hint);
  }
  // `splitzip help build extra`: help takes one command (the extra word was dropped silently).
  if (helpFirst && mainWords.length > 2) {
    return usageBeforeCommand(`unexpected argument '${mainWords[2]}': '${BINARY_NAME} ${mainWords[0]} <command>' takes one command`, `Run '${BINARY_NAME} --help' for the commands.`);
  }
  if (helpFirst) return writeHelp(io, renderCommandHelp(command), mainJson);
  const flags = findGlobalFlags(command, words.slice(1));
  const debug = leadingDebug || flags.debug;
  // Read from the words before they parse: a usage error prints its JSON document too (the parsed
  // value replaces it once they do).
  let json = findJsonRequest(command, words.slice(1));
  if (flags.help) return writeHelp(io, renderCommandHelp(command), json);
  // A global option, listed as such by the main help: after a command too.
  if (flags.version) return writeVersion(io, json);

  // gc writes the cache (its lock, a new manifest): a read-only one is NOT_WRITABLE, as build says.
  let writtenCache: string | undefined;
  try {
    const args = parseCommandArgs(command, words.slice(1));
    json = (args as { json?: unknown }).json === true;
    const { cache, dryRun } = args as { cache?: unknown; dryRun?: unknown };
    // A dry run writes nothing: a refused read there stays the store's error.
    if (command.name === 'gc' && typeof cache === 'string' && dryRun !== true) writtenCache = cache;
    // A signal before the command began (while the CLI loaded): it stops here, as it would at its first step.
    throwIfInterrupted(signal);
    return await command.run({ args, io, signal, ...(options.collectGarbage ? { collectGarbage: options.collectGarbage } : {}) });
  } catch (caught) {
    // The store abandoned its S3 requests at the signal (ABORTED): an interrupt, said as every command says it.
    const error =
      signal?.aborted && isStoreError(caught) && caught.code === 'ABORTED'
        ? interruptedError(signal)
        : writtenCache === undefined
          ? caught
          : wrapCacheWriteError(caught, writtenCache);
    // A library's USAGE (an --out inside the model, say) is a usage error as the parser's are.
    const usage = error instanceof UsageError || isBuilderError(error, 'USAGE');
    const message = usage ? (error as Error).message : describeError(error);
    // With --json, stdout holds one JSON document whatever the exit (`> report.json` was left empty).
    if (json) io.stdout.write(renderErrorJson(error, message));
    // A tensor or file name in it with a control character (an ESC) is shown escaped (showName); --json has it as it is.
    const shown = showLines(message);
    if (usage) {
      io.stderr.write(`${BINARY_NAME} ${command.name}: ${shown}\nRun '${BINARY_NAME} ${command.name} --help' for usage.\n`);
      return EXIT_USAGE;
    }
    io.stderr.write(`${BINARY_NAME} ${command.name}: error: ${shown}\n`);
    if (debug && error instanceof Error && error.stack) io.stderr.write(`${error.stack}\n`);
    if (error instanceof BuilderError && error.code === 'INTERRUPTED') return error.context.signal === 'SIGTERM' ? EXIT_TERMINATED : EXIT_INTERRUPTED;
    return EXIT_FAILURE;
  }
}

const isHelpWord = (word: string | undefined): boolean => word === '--help' || word === '-h' || word === 'help';
const isVersionWord = (word: string | undefined): boolean => word === '--version' || word === '-v';
/** `--json`, `--no-json`, `--json=true|false`, `--debug`: taken before the command only where no command runs. */
const isGlobalWord = (word: string): boolean => word === DEBUG_FLAG || word === '--json' || word === '--no-json' || word === '--json=true' || word === '--json=false';

/** `--version`: with --json the document `{ "version": "0.58.0" }`, as every other stdout of --json is one. */
function writeVersion(io: CommandIo, json: boolean): number {
  io.stdout.write(json ? `${JSON.stringify({ version: VERSION }, null, 2)}\n` : `${VERSION}\n`);
  return EXIT_OK;
}

/**
 * Help is for people: with --json its text goes to stderr, where a terminal still shows it, and
 * stdout holds the document `{ "help": "<the text>" }` (the text was stdout, which then did not parse).
 */
function writeHelp(io: CommandIo, text: string, json: boolean): number {
  if (!json) {
    io.stdout.write(text);
    return EXIT_OK;
  }
  io.stderr.write(text);
  io.stdout.write(`${JSON.stringify({ help: text }, null, 2)}\n`);
  return EXIT_OK;
}

function findCommand(name: string | undefined): CommandDef | undefined {
  return COMMANDS.find((c) => c.name === name);
}

/**
 * The lines for a first word that names no command: a near miss of a command's name suggests it
 * (`buld` → `build`), as a near miss of an option's does; an option is called one (`--bogus` was
 * an "unknown command"), and one before a command says that options follow it.
 */
function describeUnknownCommand(name: string, words: readonly string[]): { message: string; hint: string } {
  const names = COMMANDS.map((c) => c.name);
  if (name.startsWith('-')) {
    const commandAfter = words.some((word) => names.includes(word));
    const hint = commandAfter ? `options go after the command: ${BINARY_NAME} <command> [arguments] [options]` : `Run '${BINARY_NAME} --help' for the commands and their options.`;
    return { message: `unknown option '${name}'`, hint };
  }
  const near = findClosestName(name, names);
  return { message: `unknown command '${name}'${near === undefined ? '' : `: did you mean '${near}'?`}`, hint: `Run '${BINARY_NAME} --help' for the commands.` };
}

/** What argv tells of a command line without running it (see readInvocation). */
export interface Invocation {
  command: string | undefined;
  json: boolean;
  /** The cache it works on (build's --out, the others' positional), where argv parses. */
  cache?: string;
  /** gc --drop-unbound-entries (its stop at once may leave the dropped entries' blobs). */
  dropUnboundEntries?: boolean;
  dryRun?: boolean;
}

/**
 * The command a command line runs, whether it asked for --json, and its cache, as far as argv
 * tells without running it (undefined and false where it does not parse): the CLI's signal handler
 * names the command and the cache and answers --json for a second signal, which exits at once.
 */
export function readInvocation(argv: readonly string[]): Invocation {
  const words = argv[0] === DEBUG_FLAG ? argv.slice(1) : argv;
  const command = isHelpWord(words[0]) ? undefined : findCommand(words[0]);
  if (command === undefined) return { command: undefined, json: false };
  try {
    const args = parseCommandArgs(command, words.slice(1)) as { json?: unknown; out?: unknown; cache?: unknown; dropUnboundEntries?: unknown; dryRun?: unknown };
    const cache = command.name === 'build' ? args.out : args.cache;
    return {
      command: command.name,
      json: args.json === true,
      ...(typeof cache === 'string' ? { cache } : {}),
      ...(args.dropUnboundEntries === true ? { dropUnboundEntries: true } : {}),
      ...(args.dryRun === true ? { dryRun: true } : {}),
    };
  } catch {
    return { command: command.name, json: findJsonRequest(command, words.slice(1)) };
  }
}

/**
 * The line for a second signal, which exits at once: what that may leave in the cache depends on
 * the command. A build leaves its writers' temp files (committed entries are whole); a gc may
 * leave the blobs of entries its drop already removed from the manifest (orphans) and its own
 * writer lock, dead with it. Each names the command that clears it, with the real cache path.
 */
export function describeSecondSignal(invocation: Invocation, signal: string): string {
  const stopped = `stopped at once by a second ${signal}`;
  // Quoted where a shell would split it: the command is there to copy.
  const cache = invocation.cache === undefined ? '<cache>' : quoteForShell(invocation.cache);
  if (invocation.command === 'build') return `${stopped}; committed entries are kept, and \`${BINARY_NAME} gc ${cache}\` removes any temp files left behind`;
  if (invocation.command === 'gc') {
    if (invocation.dryRun) return `${stopped}; a dry run changes nothing`;
    const orphans = invocation.dropUnboundEntries ? 'the blobs of entries it had dropped (orphans: no entry references them)' : 'blobs it had not removed yet';
    return (
      `${stopped}; the cache stays valid, but may hold ${orphans}, temp files, and this process's writer lock (its holder now dead): ` +
      `the next \`${BINARY_NAME} gc ${cache}\` removes them (\`${BINARY_NAME} verify ${cache}\` notes them)`
    );
  }
  return stopped;
}
