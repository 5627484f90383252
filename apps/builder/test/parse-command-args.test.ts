import { describe, expect, it } from 'vitest';
import { MIN_S3_GC_AGE_MS } from '@splitzip/store';
import { defineCommand } from '../src/define-command.js';
import { UsageError } from '../src/errors.js';
import { parseCommandArgs } from '../src/parse-command-args.js';
import { parseDurationMs } from '../src/parse-duration.js';
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

function usageErrorOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error('no UsageError');
}

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
    // A near miss names the flag the user most likely meant.
    expect(usageError(['m', '--out', 'c', '--coverag-min', '0.9'])).toBe("unknown option '--coverag-min': did you mean '--coverage-min'?");
    expect(usageError(['m', '--ot', 'c'])).toBe("unknown option '--ot': did you mean '--out'?");
    expect(usageError(['m', 'n', '--out', 'c'])).toBe("unexpected argument 'n'");
    expect(usageError(['m', '--out', 'c', '--coverage-min', 'abc'])).toContain("needs a number, got 'abc'");
    expect(usageError(['m', '--out', 'c', '--coverage-min', ''])).toContain('needs a number');
    expect(usageError(['m', '--out', 'c', '--coverage-min', '1.5'])).toContain('at most 1');
    expect(usageError(['m', '--out', 'c', '--coverage-min', '-0.1'])).toContain('at least 0');
    expect(usageError(['m', '--out', 'c', '--jobs', '1.5'])).toContain('whole number');
    expect(usageError(['m', '--out', 'c', '--backend', 'tpu'])).toContain('must be one of auto, cpu');
    // `--json=true` is taken: `--json=yes` says what is (it said "takes no value").
    expect(usageError(['m', '--out', 'c', '--json=yes'])).toBe("option '--json' takes true or false (--json=true|false), or no value (--json, --no-json); got 'yes'");
    expect(usageError(['m', '--out', 'c', '--no-json=true'])).toBe("option '--no-json' takes no value");
    expect(usageError(['m', '--out', 'c', '--no-out'])).toBe("unknown option '--no-out'");
  });

  it('takes numbers as JavaScript writes decimals, one rule for every numeric option', () => {
    const parse = (option: string, raw: string): unknown => (parseCommandArgs(command, ['m', '--out', 'c', option, raw]) as Record<string, unknown>)[option === '--jobs' ? 'jobs' : 'coverageMin'];
    // `1e-1` was refused as "needs a number" while `.5`, `5.` and `+2` passed.
    for (const [raw, value] of [['1e-1', 0.1], ['.5', 0.5], ['1.', 1], ['+0.25', 0.25], ['2.5E-1', 0.25], ['0', 0]] as const) expect(parse('--coverage-min', raw), raw).toBe(value);
    for (const [raw, value] of [['1e3', 1000], ['+2', 2], ['2.0', 2], ['2E1', 20]] as const) expect(parse('--jobs', raw), raw).toBe(value);
    // -0 is 0, not a negative zero that passes `min: 0`.
    expect(Object.is(parse('--jobs', '-0'), 0)).toBe(true);
    expect(Object.is(parse('--coverage-min', '-0.0e5'), 0)).toBe(true);
    for (const raw of ['NaN', 'Infinity', '-Infinity', '0x10', '0b1', '1e', 'e3', '.', ' 1', '1 ', '1_000', '-', '']) {
      expect(usageError(['m', '--out', 'c', '--coverage-min', raw]), raw).toContain(`needs a number, got '${raw}'`);
    }
    expect(usageError(['m', '--out', 'c', '--jobs', '1e400'])).toBe("option '--jobs' needs a finite number, got '1e400'");
    // Beyond the range says the range, not "not a whole number".
    expect(usageError(['m', '--out', 'c', '--coverage-min', '1e21'])).toBe("option '--coverage-min' must be at most 1, got 1e21");
    expect(usageError(['m', '--out', 'c', '--jobs', '-1e0'])).toBe("option '--jobs' must be at least 0, got -1e0");
    expect(usageError(['m', '--out', 'c', '--jobs', '1.5e0'])).toBe("option '--jobs' needs a whole number, got '1.5e0'");
  });

  it('refuses an option with a value given twice, and an empty argument', () => {
    // `--out a --out b` built into b without a word.
    expect(usageError(['m', '--out', 'a', '--out', 'b'])).toBe("option '--out' is given more than once");
    expect(usageError(['m', '--out=a', '--out=a'])).toBe("option '--out' is given more than once");
    expect(usageError(['m', '--out', 'c', '--jobs', '1', '--jobs=2'])).toBe("option '--jobs' is given more than once");
    // A flag said twice means the same thing twice.
    expect(parseCommandArgs(command, ['m', '--out', 'c', '--json', '--json']).json).toBe(true);
    // `build "" --out c` read the current directory as the model; `--out ''` was refused already.
    expect(usageError(['', '--out', 'c'])).toBe('argument <model> needs a value, got an empty one');
    expect(usageError(['--out', 'c', '--', ''])).toBe('argument <model> needs a value, got an empty one');
  });

  it('takes durations with the same number syntax, unsigned', () => {
    expect(parseDurationMs('1h', '--min-age', 'gc')).toBe(3_600_000);
    expect(parseDurationMs('.5h', '--min-age', 'gc')).toBe(1_800_000);
    expect(parseDurationMs('1e3', '--min-age', 'gc')).toBe(1_000_000);
    expect(parseDurationMs('1.5e1ms', '--min-age', 'gc')).toBe(15);
    for (const text of ['-1h', '+1h', '1 week', 'h', '0x10s', 'Infinity']) expect(() => parseDurationMs(text, '--min-age', 'gc'), text).toThrow(/takes a duration/);
    // Its examples are durations --min-age takes (at least 35m): 30s and 10m were refused as too short.
    const examples = /like (.*?) \(/.exec(usageErrorOf(() => parseDurationMs('soon', '--min-age', 'gc')))![1]!.split(/, | or /);
    expect(examples.length).toBeGreaterThan(1);
    for (const example of examples) expect(parseDurationMs(example, '--min-age', 'gc'), example).toBeGreaterThanOrEqual(MIN_S3_GC_AGE_MS);
  });

  it('renders help from the same spec', () => {
    const help = renderCommandHelp(command);
    expect(help).toContain('Usage: splitzip demo <model> --out <out> [options]');
    expect(help).toContain('--coverage-min <coverage-min>');
    expect(help).toContain('(default: 0.99)');
    expect(help).toContain('--backend <auto|cpu>');
    expect(help).toContain('--help');
  });

  it('help: a long list of choices goes into the description, and a description past 100 columns wraps under itself', () => {
    const wide = defineCommand({
      name: 'wide',
      description: 'A command of long options',
      args: {
        backend: { type: 'string', description: 'Encoder backend', choices: ['auto', 'cpu', 'webasm', 'webgpu', 'codec'], default: 'auto' },
        chatty: { type: 'boolean', description: `Says a lot: ${'word '.repeat(30).trim()}` },
      },
      run: async () => 0,
    });
    const lines = renderCommandHelp(wide).split('\n');
    // `<auto|cpu|webasm|webgpu|codec>` pushed every description 42 columns right.
    expect(lines).toContain('  --backend <backend>  Encoder backend: auto, cpu, webasm, webgpu, codec (default: auto)');
    const chatty = lines.findIndex((line) => line.startsWith('  --chatty'));
    expect(lines[chatty + 1]).toMatch(/^ {23}word/);
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(100);
    expect(lines.slice(chatty, chatty + 3).join(' ').replace(/\s+/g, ' ')).toContain(`Says a lot: ${'word '.repeat(30).trim()}`);
  });
});
