// With --json, every exit of the real binary prints exactly one JSON document on stdout: a usage
// error (the parser's: `gc --bogus --json > r.json` left r.json empty), one before any command (an
// unknown command, none at all), --version and --help (text before), and a signal that came while
// the CLI was still loading (it killed the process before any handler was set: no document).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { assertBuilt, CLI_PATH, collect, runCli } from './helpers/run-cli.js';

let temp: TempDir;
let cacheDir: string;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir('splitzip-json-every-exit-');
  const model = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [gaussianBf16('w', [64, 64], 1)]);
  cacheDir = join(temp.path, 'cache');
  expect((await runCli(['build', model, '--out', cacheDir, '--quiet'])).code).toBe(0);
});
afterAll(async () => temp?.cleanup());

describe('--json usage errors', () => {
  const cases: [string[], string][] = [
    [['gc', '--bogus', '--json', '/tmp/x'], "unknown option '--bogus'"],
    [['gc', '--json'], 'missing argument <cache-dir>'],
    [['gc', '/tmp/x', '--min-age', '--json'], "option '--min-age' needs a value <duration>"],
    [['verify', '/tmp/x', '--json', '--unknown'], "unknown option '--unknown'"],
    [['inspect', '/tmp/x', '--json=true', 'extra'], "unexpected argument 'extra'"],
    [['stats', '--json', 'm.safetensors', '--coverage-min', 'x'], "option '--coverage-min' needs a number, got 'x'"],
    [['build', 'm.safetensors', '--json'], "missing option '--out'"],
  ];
  it.each(cases)('%j: one USAGE document on stdout, the text on stderr, exit 2', async (argv, message) => {
    const result = await runCli(argv);
    expect(result.code, result.stderr).toBe(2);
    expect(JSON.parse(result.stdout)).toEqual({ error: { code: 'USAGE', message } });
    expect(result.stderr).toBe(`splitzip ${argv[0]}: ${message}\nRun 'splitzip ${argv[0]} --help' for usage.\n`);
  });

  it('no document where --json is turned off after, or is the value of another option', async () => {
    for (const argv of [['gc', '--json', '--no-json', '--bogus', '/tmp/x'], ['gc', '--json=false', '--bogus', '/tmp/x'], ['inspect', '/tmp/x', '--model=--json', '--bogus'], ['gc', '--bogus', '--', '--json']]) {
      const result = await runCli(argv);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stdout, argv.join(' ')).toBe('');
    }
  });
});

describe('--json before or without a command', () => {
  // Paths taken before a command's options parse: an unknown command left stdout empty, the version
  // and help were text on stdout (`splitzip --version --json` printed `0.51.0`), no command nothing.
  const version = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

  it.each([
    [['frob', '--json'], "unknown command 'frob'", "Run 'splitzip --help' for the commands."],
    [['buld', '--json=true'], "unknown command 'buld': did you mean 'build'?", "Run 'splitzip --help' for the commands."],
    [['help', 'frob', '--json'], "unknown command 'frob'", "Run 'splitzip --help' for the commands."],
    [['--bogus', '--json'], "unknown option '--bogus'", "Run 'splitzip --help' for the commands and their options."],
    [['--json', 'gc', '/tmp/x'], "unknown option '--json'", 'options go after the command: splitzip <command> [arguments] [options]'],
    [['help', 'build', 'extra', '--json'], "unexpected argument 'extra': 'splitzip help <command>' takes one command", "Run 'splitzip --help' for the commands."],
  ])('%j: one USAGE document on stdout, the text on stderr, exit 2', async (argv, message, hint) => {
    const result = await runCli(argv);
    expect(result.code, result.stderr).toBe(2);
    expect(JSON.parse(result.stdout)).toEqual({ error: { code: 'USAGE', message } });
    expect(result.stderr).toBe(`splitzip: ${message}\n${hint}\n`);
  });

  it('an unknown command without --json (or with it turned off) prints nothing on stdout, as before', async () => {
    for (const argv of [['frob'], ['frob', '--json', '--no-json'], ['frob', '--', '--json']]) {
      const result = await runCli(argv);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stdout, argv.join(' ')).toBe('');
      expect(result.stderr, argv.join(' ')).toBe("splitzip: unknown command 'frob'\nRun 'splitzip --help' for the commands.\n");
    }
  });

  it('no command: the main help on stderr, exit 2, and with --json a USAGE document listing the commands', async () => {
    const plain = await runCli([]);
    expect(plain.code).toBe(2);
    expect(plain.stdout).toBe('');
    expect(plain.stderr).toMatch(/^splitzip \S+: build, verify/);
    for (const argv of [['--json'], ['--debug', '--json'], ['--json=true']]) {
      const result = await runCli(argv);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(JSON.parse(result.stdout)).toEqual({ error: { code: 'USAGE', message: 'missing command', commands: ['build', 'verify', 'inspect', 'stats', 'gc'] } });
      expect(result.stderr).toBe(plain.stderr);
    }
  });

  it('--version with --json prints { "version" } and exits 0; without it the bare version, as before', async () => {
    for (const argv of [['--version', '--json'], ['-v', '--json'], ['--json', '--version'], ['build', '--version', '--json'], ['gc', '--json', '-v']]) {
      const result = await runCli(argv);
      expect(result.code, argv.join(' ')).toBe(0);
      expect(JSON.parse(result.stdout), argv.join(' ')).toEqual({ version });
      expect(result.stderr, argv.join(' ')).toBe('');
    }
    for (const argv of [['--version'], ['build', '--version'], ['--version', '--json', '--no-json']]) {
      const result = await runCli(argv);
      expect(result.stdout, argv.join(' ')).toBe(`${version}\n`);
    }
  });

  it('help with --json: the text on stderr, { "help": text } on stdout, exit 0; without it the text on stdout, as before', async () => {
    const buildHelp = await runCli(['build', '--help']);
    const mainHelp = await runCli(['--help']);
    expect(buildHelp.code).toBe(0);
    expect(buildHelp.stdout).toMatch(/^splitzip build: /);
    expect(mainHelp.stdout).toMatch(/^splitzip \S+: build, verify/);
    const cases: [string[], string][] = [
      [['build', '--help', '--json'], buildHelp.stdout],
      [['build', '--json', '-h'], buildHelp.stdout],
      [['help', 'build', '--json'], buildHelp.stdout],
      [['--help', 'build', '--json'], buildHelp.stdout],
      [['--help', '--json'], mainHelp.stdout],
      [['help', '--json'], mainHelp.stdout],
    ];
    for (const [argv, text] of cases) {
      const result = await runCli(argv);
      expect(result.code, argv.join(' ')).toBe(0);
      expect(JSON.parse(result.stdout), argv.join(' ')).toEqual({ help: text });
      expect(result.stderr, argv.join(' ')).toBe(text);
    }
  });
});

describe('a signal while the CLI loads', () => {
  // The hooks hold the module that defines runCli until `release` exists: the signal is sent while
  // it is held, before any command code ran (the old binary had no handler yet: killed, no document).
  for (const [name, status] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    it(`gc --json stopped by ${name} then prints one JSON document and exits ${status} (or completes, with its report)`, { timeout: 30_000 }, async () => {
      const holdDir = join(temp.path, `hold-${name}`);
      await mkdir(holdDir);
      const child = spawn(process.execPath, ['--import', new URL('./helpers/hold-cli-load.mjs', import.meta.url).href, CLI_PATH, 'gc', cacheDir, '--json'], {
        env: { ...process.env, SPLITZIP_TEST_HOLD_DIR: holdDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const result = collect(child, 25_000);
      for (let waited = 0; !existsSync(join(holdDir, 'held')); waited += 10) {
        if (waited > 20_000) throw new Error('the CLI never loaded its runCli module');
        await sleep(10);
      }
      child.kill(name);
      await writeFile(join(holdDir, 'release'), '');
      const { code, signal, stdout, stderr } = await result;
      expect(signal, stderr).toBeNull();
      const document = JSON.parse(stdout) as { error?: unknown; orphanBlobs?: unknown };
      if (code === 0) {
        // The signal was taken after the command's last check: its report, whole.
        expect(document.orphanBlobs).toEqual([]);
      } else {
        expect(code, stderr).toBe(status);
        expect(document).toEqual({ error: { code: 'INTERRUPTED', message: `interrupted by ${name}`, signal: name } });
        expect(stderr).toBe(`splitzip gc: error: interrupted by ${name}\n`);
      }
    });
  }

  it('two SIGINTs while it loads: one INTERRUPTED document, exit 130, no cleanup advice for work never begun', { timeout: 30_000 }, async () => {
    const holdDir = join(temp.path, 'hold-twice');
    await mkdir(holdDir);
    const child = spawn(process.execPath, ['--import', new URL('./helpers/hold-cli-load.mjs', import.meta.url).href, CLI_PATH, 'gc', cacheDir, '--json'], {
      env: { ...process.env, SPLITZIP_TEST_HOLD_DIR: holdDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const result = collect(child, 25_000);
    for (let waited = 0; !existsSync(join(holdDir, 'held')); waited += 10) {
      if (waited > 20_000) throw new Error('the CLI never loaded its runCli module');
      await sleep(10);
    }
    // Both signals reach the process while its CLI is held (the pauses let each be handled first).
    child.kill('SIGINT');
    await sleep(200);
    child.kill('SIGINT');
    await sleep(200);
    await writeFile(join(holdDir, 'release'), '');
    const { code, signal, stdout, stderr } = await result;
    expect(signal, stderr).toBeNull();
    expect(code, stderr).toBe(130);
    // The HEAD before this test printed two documents (the second with gc's cleanup advice).
    expect(JSON.parse(stdout)).toEqual({ error: { code: 'INTERRUPTED', message: 'interrupted by SIGINT', signal: 'SIGINT' } });
    expect(stderr).toBe('splitzip gc: error: interrupted by SIGINT\n');
  });
});
