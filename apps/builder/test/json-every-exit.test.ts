// With --json, every exit of the real binary prints exactly one JSON document on stdout: a usage
// error (the parser's: `gc --bogus --json > r.json` left r.json empty) and a signal that came while
// the CLI was still loading (it killed the process before any handler was set: no document).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
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
