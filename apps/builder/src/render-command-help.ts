import type { ArgSpec, CommandDef } from './define-command.js';
import { wrapAtSpaces } from './format-units.js';
import { toFlag } from './parse-command-args.js';

export const BINARY_NAME = 'splitzip';

/** Columns a help line takes at most: a description past it goes on indented lines of its own. */
export const HELP_WIDTH_COLUMNS = 100;
/** The longest `<a|b|c>` label: longer lists go into the description (they pushed every description right). */
const CHOICES_LABEL_MAX_COLUMNS = 26;

/** `--help` text of one command, generated from its args spec. */
export function renderCommandHelp(command: CommandDef): string {
  const entries = Object.entries(command.args);
  const positionals = entries.filter(([, spec]) => spec.type === 'positional');
  const options = entries.filter(([, spec]) => spec.type !== 'positional');

  const usage = [BINARY_NAME, command.name];
  for (const [name, spec] of positionals) {
    const hint = `<${valueHint(name, spec)}>`;
    usage.push('required' in spec && spec.required ? hint : `[${hint}]`);
  }
  for (const [name, spec] of options) {
    if ('required' in spec && spec.required) usage.push(`--${toFlag(name)} <${valueHint(name, spec)}>`);
  }
  usage.push('[options]');

  const lines = [`${BINARY_NAME} ${command.name}: ${command.description}`, '', `Usage: ${usage.join(' ')}`, ''];
  if (positionals.length > 0) {
    lines.push('Arguments:');
    lines.push(...table(positionals.map(([name, spec]) => [`<${valueHint(name, spec)}>`, spec.description])));
    lines.push('');
  }
  const optionRows = options.map(([name, spec]): [string, string] => [optionLabel(name, spec), describe(spec, name)]);
  optionRows.push(['--debug', 'Print stack traces with errors']);
  optionRows.push(['-h, --help', 'Show this help']);
  lines.push('Options:', ...table(optionRows));
  if (command.notes && command.notes.length > 0) lines.push('', ...command.notes);
  return `${lines.join('\n')}\n`;
}

/** Top-level `splitzip --help`. */
export function renderMainHelp(commands: readonly CommandDef[], version: string): string {
  const lines = [
    `${BINARY_NAME} ${version}: build, verify, inspect and analyse a SplitZip compressed shard cache`,
    '',
    `Usage: ${BINARY_NAME} <command> [arguments] [options]`,
    '',
    'Commands:',
    ...table(commands.map((command) => [command.name, command.description])),
    '',
    'Global options:',
    ...table([
      ['-h, --help', 'Show help (also after a command)'],
      ['-v, --version', 'Print the version'],
      ['--debug', 'Print stack traces with errors'],
    ]),
    '',
    'Exit codes: 0 success, 1 failure (bad input, verify failed), 2 usage error,',
    '            130 / 143 interrupted by SIGINT / SIGTERM (the cache stays valid).',
    `Run '${BINARY_NAME} <command> --help' for a command's options.`,
  ];
  return `${lines.join('\n')}\n`;
}

function valueHint(name: string, spec: ArgSpec): string {
  return ('valueHint' in spec && spec.valueHint) || toFlag(name);
}

function optionLabel(name: string, spec: ArgSpec): string {
  const flag = `--${toFlag(name)}`;
  // On by default: the way to turn it off is what a user looks for.
  if (spec.type === 'boolean') return spec.default === true ? `--[no-]${toFlag(name)}` : flag;
  if (spec.type === 'string' && spec.choices && choicesLabel(flag, spec.choices).length <= CHOICES_LABEL_MAX_COLUMNS) return choicesLabel(flag, spec.choices);
  return `${flag} <${valueHint(name, spec)}>`;
}

const choicesLabel = (flag: string, choices: readonly string[]): string => `${flag} <${choices.join('|')}>`;

function describe(spec: ArgSpec, name = ''): string {
  const parts = [spec.description];
  if (spec.type === 'string' && spec.choices && choicesLabel(`--${toFlag(name)}`, spec.choices).length > CHOICES_LABEL_MAX_COLUMNS) parts[0] = `${spec.description}: ${spec.choices.join(', ')}`;
  if (spec.type === 'boolean' && spec.default === true) parts.push('(default: on)');
  else if (spec.type !== 'positional' && spec.type !== 'boolean' && spec.default !== undefined) {
    parts.push(`(default: ${spec.default})`);
  }
  if ('required' in spec && spec.required) parts.push('(required)');
  return parts.join(' ');
}

/** Two columns; a right cell past HELP_WIDTH_COLUMNS wraps at spaces onto lines indented to it. */
function table(rows: readonly (readonly [string, string])[]): string[] {
  const width = Math.max(0, ...rows.map(([left]) => left.length));
  const indent = width + 4;
  return rows.flatMap(([left, right]) => {
    const [first = '', ...rest] = wrapAtSpaces(right, Math.max(HELP_WIDTH_COLUMNS - indent, 20));
    return [`  ${left.padEnd(width)}  ${first}`, ...rest.map((line) => `${' '.repeat(indent)}${line}`)];
  });
}
