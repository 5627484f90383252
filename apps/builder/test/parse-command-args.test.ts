import { describe, expect, it } from 'vitest';
import { defineCommand } from '../src/define-command.js';
import { UsageError } from '../src/errors.js';
import { parseCommandArgs } from '../src/parse-command-args.js';
import { renderCommandHelp } from '../src/render-command-help.js';

const command = defineCommand({
  name: 'demo',
  description: 'A demo command',
  args: {
    model: { type: 'positional', description: 'The model', required: true },
    out: { type: 'string', description: 'Output dir', required: true },
    coverageMin: { type: 'number', description: 'Gate', default: 0.99, min: 0, max: 1 },
    jobs: { type: 'number', description: 'Jobs', integer: true, min: 0 },
    backend: { type: 'string', description: 'Backend', choices: ['auto', 'cpu'], default: 'auto' },
    json: { type: 'boolean', description: 'JSON' },
    decode: { type: 'boolean', description: 'Decode', default: true },
  },
  async run() {
    return 0;
  },
});

function usageError(argv: string[]): string {
  try {
    parseCommandArgs(command, argv);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error(`no UsageError for ${argv.join(' ')}`);
}

describe('parseCommandArgs', () => {
  it('parses positionals, both option spellings, booleans and defaults', () => {
    const args = parseCommandArgs(command, ['m.safetensors', '--out', 'cache', '--coverage-min=0.95', '--json']);
    expect(args).toEqual({ model: 'm.safetensors', out: 'cache', coverageMin: 0.95, jobs: undefined, backend: 'auto', json: true, decode: true });
  });

  it('accepts options before the positional, --no-flag, and -- before a dash-named path', () => {
    const args = parseCommandArgs(command, ['--out=c', '--jobs', '3', '--no-decode', '--backend', 'cpu', '--', '--weird-name']);
    expect(args.model).toBe('--weird-name');
    expect(args.jobs).toBe(3);
    expect(args.decode).toBe(false);
    expect(args.backend).toBe('cpu');
  });

  it('rejects every malformed command line with a message naming the option', () => {
    expect(usageError(['--out', 'c'])).toBe('missing argument <model>');
    expect(usageError(['m'])).toBe("missing option '--out'");
    expect(usageError(['m', '--out'])).toContain("option '--out' needs a value");
    expect(usageError(['m', '--out', 'c', '--bogus'])).toBe("unknown option '--bogus'");
    expect(usageError(['m', '--out', 'c', '-x'])).toBe("unknown option '-x'");
    expect(usageError(['m', 'n', '--out', 'c'])).toBe("unexpected argument 'n'");
    expect(usageError(['m', '--out', 'c', '--coverage-min', 'abc'])).toContain("needs a number, got 'abc'");
    expect(usageError(['m', '--out', 'c', '--coverage-min', ''])).toContain('needs a number');
    expect(usageError(['m', '--out', 'c', '--coverage-min', '1.5'])).toContain('at most 1');
    expect(usageError(['m', '--out', 'c', '--coverage-min', '-0.1'])).toContain('at least 0');
    expect(usageError(['m', '--out', 'c', '--jobs', '1.5'])).toContain('whole number');
    expect(usageError(['m', '--out', 'c', '--jobs', '1e3'])).toContain('needs a number');
    expect(usageError(['m', '--out', 'c', '--backend', 'tpu'])).toContain('must be one of auto, cpu');
    expect(usageError(['m', '--out', 'c', '--json=yes'])).toContain('takes no value');
    expect(usageError(['m', '--out', 'c', '--no-out'])).toBe("unknown option '--no-out'");
  });

  it('renders help from the same spec', () => {
    const help = renderCommandHelp(command);
    expect(help).toContain('Usage: splitzip demo <model> --out <out> [options]');
    expect(help).toContain('--coverage-min <coverage-min>');
    expect(help).toContain('(default: 0.99)');
    expect(help).toContain('--backend <auto|cpu>');
    expect(help).toContain('--help');
  });
});
