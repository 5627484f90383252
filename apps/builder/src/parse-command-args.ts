import { findClosestName } from '@splitzip/codec/internal';
import type { ArgSpec, ArgsSpec, CommandDef, NumberArgSpec, ParsedArgs } from './define-command.js';
import { SIGNED_DECIMAL } from './decimal-number.js';
import { UsageError } from './errors.js';

/**
 * Parses `argv` (the words after the command name) against a command's args spec.
 * Accepts `--name value`, `--name=value`, `--flag`, `--no-flag`, and `--` to end options.
 * Every mistake is a UsageError naming the option, so the CLI can exit 2 with one clear line.
 * `--help`/`-h`, `--version`/`-v` are not handled here (the CLI looks for them first:
 * findGlobalFlags); `--debug` is skipped.
 */
export function parseCommandArgs<A extends ArgsSpec>(command: CommandDef<A>, argv: readonly string[]): ParsedArgs<A> {
  const values: Record<string, unknown> = {};
  const positionalNames = Object.keys(command.args).filter((name) => command.args[name]!.type === 'positional');
  const positionals: string[] = [];
  // Options that take a value, as given: a second one is refused (`--out a --out b` silently built into b).
  const valued = new Set<string>();
  let optionsEnded = false;

  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (optionsEnded || !word.startsWith('-') || word === '-') {
      positionals.push(word);
      continue;
    }
    if (word === '--') {
      optionsEnded = true;
      continue;
    }
    if (word === DEBUG_FLAG) continue;
    if (!word.startsWith('--')) throw new UsageError(`unknown option '${word}'`, command.name);

    const eq = word.indexOf('=');
    let name = eq === -1 ? word.slice(2) : word.slice(2, eq);
    let inlineValue = eq === -1 ? undefined : word.slice(eq + 1);
    let negated = false;
    const givenName = name;
    let spec = lookupOption(command, name);
    if (spec === undefined && name.startsWith('no-')) {
      const base = lookupOption(command, name.slice(3));
      if (base?.type === 'boolean') {
        negated = true;
        name = name.slice(3);
        spec = base;
      }
    }
    if (spec === undefined) throw new UsageError(`unknown option '--${name}'${suggestFlag(command, name)}`, command.name);
    const key = toKey(command, name);

    if (spec.type === 'boolean') {
      if (inlineValue !== undefined) {
        if (negated) throw new UsageError(`option '--${givenName}' takes no value`, command.name);
        // `--json=yes` said "takes no value", though `--json=true` is taken: say what is.
        if (!['true', 'false'].includes(inlineValue)) {
          throw new UsageError(`option '--${givenName}' takes true or false (--${givenName}=true|false), or no value (--${givenName}, --no-${givenName}); got '${inlineValue}'`, command.name);
        }
        values[key] = inlineValue === 'true';
      } else {
        values[key] = !negated;
      }
      continue;
    }
    if (valued.has(key)) throw new UsageError(`option '--${name}' is given more than once`, command.name);
    valued.add(key);
    if (inlineValue === undefined) {
      const next = argv[i + 1];
      if (next === undefined || (next.startsWith('--') && next.length > 2)) {
        throw new UsageError(`option '--${name}' needs a value${hint(spec)}`, command.name);
      }
      inlineValue = next;
      i++;
    }
    values[key] = convertValue(command, name, spec, inlineValue);
  }

  if (positionals.length > positionalNames.length) {
    throw new UsageError(`unexpected argument '${positionals[positionalNames.length]}'`, command.name);
  }
  positionalNames.forEach((name, index) => {
    const value = positionals[index];
    // `build "" --out c` (a variable that expanded to nothing) read the current directory as the model.
    if (value === '') throw new UsageError(`argument <${valueHintOf(command.args[name]!, name)}> needs a value, got an empty one`, command.name);
    if (value !== undefined) values[name] = value;
  });

  for (const [name, spec] of Object.entries(command.args)) {
    if (values[name] !== undefined) continue;
    if ('default' in spec && spec.default !== undefined) values[name] = spec.default;
    else if (spec.type === 'boolean') values[name] = false;
    else if ('required' in spec && spec.required) {
      throw new UsageError(
        spec.type === 'positional' ? `missing argument <${valueHintOf(spec, name)}>` : `missing option '--${toFlag(name)}'`,
        command.name,
      );
    }
  }
  return values as ParsedArgs<A>;
}

/** Shows the stack of an error (a global option, anywhere among a command's options). */
export const DEBUG_FLAG = '--debug';

/**
 * The global flags among a command's words, found as parseCommandArgs walks them: before `--`,
 * and not where a word is an option's value (`--out -v` names a directory `-v`; it asks for no version).
 */
export function findGlobalFlags(command: CommandDef, argv: readonly string[]): { help: boolean; version: boolean; debug: boolean } {
  const found = { help: false, version: false, debug: false };
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--') break;
    if (word === '--help' || word === '-h') found.help = true;
    else if (word === '--version' || word === '-v') found.version = true;
    else if (word === DEBUG_FLAG) found.debug = true;
    else if (word.startsWith('--') && !word.includes('=')) {
      const spec = lookupOption(command, word.slice(2));
      const next = argv[i + 1];
      // As parseCommandArgs: a value-taking option takes the next word unless it is another option.
      if (spec !== undefined && spec.type !== 'boolean' && next !== undefined && !(next.startsWith('--') && next.length > 2)) i++;
    }
  }
  return found;
}

/**
 * Whether a command line asks for JSON (`--json`, `--json=true`; the last of `--json` and
 * `--no-json` wins), found as findGlobalFlags walks the words: read where the words do not parse,
 * so that a usage error still prints its JSON document (`gc --bogus --json > r.json` left it empty).
 * `--json=yes` asks for it too: its usage error is that document. False for a command without --json.
 */
export function findJsonRequest(command: CommandDef, argv: readonly string[]): boolean {
  if (lookupOption(command, 'json')?.type !== 'boolean') return false;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--') break;
    if (word === '--json' || word.startsWith('--json=')) json = word !== '--json=false';
    else if (word === '--no-json') json = false;
    else if (word.startsWith('--') && !word.includes('=')) {
      const spec = lookupOption(command, word.slice(2));
      const next = argv[i + 1];
      // As parseCommandArgs: a value-taking option takes the next word unless it is another option.
      if (spec !== undefined && spec.type !== 'boolean' && next !== undefined && !(next.startsWith('--') && next.length > 2)) i++;
    }
  }
  return json;
}

/**
 * Whether a command line that names no command (yet) asks for JSON: `splitzip frob --json`,
 * `splitzip --version --json`. No spec says which words are option values here, so any `--json`
 * or `--json=<not false>` before `--` asks, and the last of it and `--no-json` / `--json=false` wins.
 */
export function findLeadingJsonRequest(argv: readonly string[]): boolean {
  let json = false;
  for (const word of argv) {
    if (word === '--') break;
    if (word === '--json' || word.startsWith('--json=')) json = word !== '--json=false';
    else if (word === '--no-json') json = false;
  }
  return json;
}

function lookupOption(command: CommandDef, flag: string): Exclude<ArgSpec, { type: 'positional' }> | undefined {
  const spec = command.args[toKey(command, flag)];
  return spec === undefined || spec.type === 'positional' ? undefined : spec;
}

/** `--coverage-min` is declared as `coverageMin` (or literally as `coverage-min`). */
function toKey(command: CommandDef, flag: string): string {
  if (flag in command.args) return flag;
  return flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

/** ": did you mean '--coverage-min'?" for a near miss of one of the command's flags, else ''. */
function suggestFlag(command: CommandDef, flag: string): string {
  const flags = Object.keys(command.args)
    .filter((key) => command.args[key]!.type !== 'positional')
    .map(toFlag);
  const near = findClosestName(flag, flags);
  return near === undefined ? '' : `: did you mean '--${near}'?`;
}

export function toFlag(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

function hint(spec: ArgSpec): string {
  return 'valueHint' in spec && spec.valueHint ? ` <${spec.valueHint}>` : '';
}

function valueHintOf(spec: ArgSpec, name: string): string {
  return 'valueHint' in spec && spec.valueHint ? spec.valueHint : name;
}

/**
 * A numeric option's value: one rule for every numeric option (SIGNED_DECIMAL, then finite, then
 * the range, then whole where asked): `1e-1` was refused as "not a number" while `.5` and `+2` passed. `-0` is 0 (a `--jobs -0` made -0 workers), and a value
 * beyond the range says the range rather than "not a whole number" (`--jobs 1e21`).
 */
function parseNumberOption(raw: string, spec: Pick<NumberArgSpec, 'min' | 'max' | 'integer'>, flag: string, commandName: string): number {
  if (!SIGNED_DECIMAL.test(raw)) throw new UsageError(`option '--${flag}' needs a number, got '${raw}'`, commandName);
  const parsed = Number(raw);
  // 1e400 is Infinity: a number too large to be one.
  if (!Number.isFinite(parsed)) throw new UsageError(`option '--${flag}' needs a finite number, got '${raw}'`, commandName);
  const value = parsed === 0 ? 0 : parsed;
  if (spec.min !== undefined && value < spec.min) throw new UsageError(`option '--${flag}' must be at least ${spec.min}, got ${raw}`, commandName);
  if (spec.max !== undefined && value > spec.max) throw new UsageError(`option '--${flag}' must be at most ${spec.max}, got ${raw}`, commandName);
  if (spec.integer && !Number.isSafeInteger(value)) throw new UsageError(`option '--${flag}' needs a whole number, got '${raw}'`, commandName);
  return value;
}

function convertValue(command: CommandDef, flag: string, spec: ArgSpec, raw: string): string | number {
  if (spec.type === 'number') return parseNumberOption(raw, spec, flag, command.name);
  // `--out=` (a variable that expanded to nothing) is a usage error, not a path the store refuses.
  if (spec.type === 'string' && raw === '') throw new UsageError(`option '--${flag}' needs a value, got an empty one`, command.name);
  if (spec.type === 'string' && spec.choices && !spec.choices.includes(raw)) {
    throw new UsageError(`option '--${flag}' must be one of ${spec.choices.join(', ')}; got '${raw}'`, command.name);
  }
  return raw;
}
