// Help, version and usage errors of the real binary: exit codes 0 and 2, one clear line.
import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel } from './helpers/models.js';
import { assertBuilt, runCli } from './helpers/run-cli.js';

const packageVersion = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

beforeAll(() => assertBuilt());

describe('splitzip usage', () => {
  it('prints the version, before or after a command (a global option)', async () => {
    const result = await runCli(['--version']);
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe(packageVersion);
    const after = await runCli(['build', '--version']);
    expect(after.code).toBe(0);
    expect(after.stdout.trim()).toBe(packageVersion);
  });

  it('shows how to turn off an option that is on by default, and the interrupt exit codes', async () => {
    const verify = await runCli(['verify', '--help']);
    expect(verify.stdout).toMatch(/--\[no-\]decode .*\(default: on\)/);
    const main = await runCli(['--help']);
    expect(main.stdout).toMatch(/130 \/ 143 interrupted by SIGINT \/ SIGTERM/);
  });

  it('prints the main help with every command, and exits 2 without a command', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    for (const name of ['build', 'verify', 'inspect', 'stats', 'gc']) expect(help.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
    const bare = await runCli([]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('Usage: splitzip <command>');
  });

  it.each(['build', 'verify', 'inspect', 'stats', 'gc'])('prints help for %s (--help, -h, help <cmd>)', async (name) => {
    const viaFlag = await runCli([name, '--help']);
    expect(viaFlag.code).toBe(0);
    expect(viaFlag.stdout).toContain(`Usage: splitzip ${name}`);
    expect(viaFlag.stdout).toContain('--help');
    const viaShort = await runCli([name, 'whatever', '-h']);
    expect(viaShort.stdout).toBe(viaFlag.stdout);
    const viaHelp = await runCli(['help', name]);
    expect(viaHelp.stdout).toBe(viaFlag.stdout);
  });

  it('help of help is the main help; -v, -h and --debug as an option value or after -- are not global flags', async () => {
    for (const args of [['help', 'help'], ['--help', '--help'], ['-h', 'help']]) {
      const help = await runCli(args);
      expect(help.code, args.join(' ')).toBe(0);
      expect(help.stdout).toContain('Usage: splitzip <command>');
    }
    // `--model -h` names a model file "-h" (it does not exist): no help, and no version for `--out -v`.
    const model = await runCli(['verify', 'no-such-cache', '--model', '-h']);
    expect(model.code).toBe(1);
    expect(model.stdout).toBe('');
    expect(model.stderr).toMatch(/NOT_A_CACHE/);
    const out = await runCli(['inspect', '--', '-v']);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/NOT_A_CACHE: .*-v is not a SplitZip cache/);
    const debugAfterEnd = await runCli(['inspect', '--', '--debug']);
    expect(debugAfterEnd.stderr).toMatch(/--debug is not a SplitZip cache/);
    // --debug anywhere before -- (and before the command) still shows the stack.
    for (const args of [['--debug', 'inspect', 'no-such-cache'], ['inspect', 'no-such-cache', '--debug']]) {
      const debug = await runCli(args);
      expect(debug.code, args.join(' ')).toBe(1);
      expect(debug.stderr, args.join(' ')).toMatch(/\n\s+at /);
    }
  });

  it('refuses an --out that looks like a URL but is no s3:// one (exit 2) and makes nothing (./S3:/bkt/p was made, then refused)', async () => {
    const temp = await createTempDir('splitzip-url-out-');
    try {
      const model = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [gaussianBf16('w', [100], 1)]);
      for (const out of ['S3://bkt/p', 's3:/bkt/p', 'gs://bkt/p', 'https://x/y']) {
        const result = await runCli(['build', model, '--out', out, '--quiet'], { cwd: temp.path });
        expect(result.code, `${out}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toContain(`splitzip build: --out ${out} looks like a URL, but object stores are s3://bucket/prefix`);
        expect(await readdir(temp.path), out).toEqual(['m.safetensors']);
      }
    } finally {
      await temp.cleanup();
    }
  });

  it('keeps every help line within 100 columns, each option on one line, and gc --help short with a pointer to the README', async () => {
    for (const args of [['--help'], ...['build', 'verify', 'inspect', 'stats', 'gc'].map((name) => [name, '--help'])]) {
      const lines = (await runCli(args)).stdout.trimEnd().split('\n');
      for (const line of lines) expect(line.length, `${args.join(' ')}: ${line}`).toBeLessThanOrEqual(100);
      // No description wrapped onto a line of its own: each option is one line.
      expect(lines.filter((line) => /^ {8,}\S/.test(line) && !/^ {8,}(130|splitzip)/.test(line)), args.join(' ')).toEqual([]);
    }
    // gc --help was 46 lines of explanations: they are the README's, and the help points there.
    const gc = (await runCli(['gc', '--help'])).stdout.trimEnd().split('\n');
    expect(gc.length).toBeLessThanOrEqual(22);
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const sections = [...gc.at(-1)!.matchAll(/"([^"]+)"/g)].map((match) => match[1]!);
    expect(gc.at(-1)).toMatch(/^More: README of @splitzip\/builder, /);
    expect(sections).toEqual(["Pruning a model's bindings", 'Removing unbound entries']);
    for (const section of sections) expect(readme).toContain(`### ${section}\n`);
    // Shorter, but still saying that on a shared cache it removes other models' bindings.
    expect(gc.find((line) => line.startsWith('  --prune-other-shards '))).toMatch(/other models' too\)$/);
  });

  it('says every top-level field of the --json output in inspect and stats help', async () => {
    expect((await runCli(['inspect', '--help'])).stdout).toContain('Print { cache, entries, totals, bindings? } as JSON');
    expect((await runCli(['stats', '--help'])).stdout).toContain('As JSON: { model, coverageMin, chunkSize, skipNoGain, tensors, totals }');
  });

  it('exits 2 with one line naming the problem for usage mistakes', async () => {
    const cases: [string[], RegExp][] = [
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['build'], /missing argument <model>/],
      [['build', 'm.safetensors'], /missing option '--out'/],
      [['build', 'm.safetensors', '--out', 'c', '--jobs', 'many'], /'--jobs' needs a number, got 'many'/],
      [['build', 'm.safetensors', '--out', 'c', '--chunk-size', '1000'], /'--chunk-size' must be a power of two/],
      [['build', 'm.safetensors', '--out', 'c', '--chunk-size', '32'], /'--chunk-size' must be at least 64/],
      [['build', 'm.safetensors', '--out', 'c', '--coverage-min', '2'], /'--coverage-min' must be at most 1/],
      [['build', 'm.safetensors', '--out', 'c', '--backend', 'tpu'], /'--backend' must be one of auto, cpu, webasm, webgpu, codec/],
      [['verify'], /missing argument <cache-dir>/],
      [['inspect', 'a', 'b'], /unexpected argument 'b'/],
      [['stats', 'm', '--bogus'], /unknown option '--bogus'/],
      [['verify', 'c', '--no-decode=false'], /option '--no-decode' takes no value/],
      // s3:// models (build, verify --model, stats since 0.57): the prefix, not one of its objects; another URL is refused.
      [['verify', 'c', '--model', 's3://bucket/model/model.safetensors'], /--model s3:\/\/bucket\/model\/model\.safetensors: an s3:\/\/ model is the prefix that holds its shards \(and index\), e\.g\. s3:\/\/bucket\/model\/, not one of its objects/],
      [['verify', 'c', '--model', 'gs://bucket/model'], /--model is read from local files; gs:\/\/bucket\/model is a URL: download the model first; s3:\/\/bucket\/prefix models are read from the object store/],
      // They judge a model's tensors: without --model they changed nothing (exit 0) before 2026-12-06.
      [['verify', 'c', '--coverage-min', '0.995'], /option '--coverage-min' judges the tensors of a model: give --model <model> with it/],
      [['verify', 'c', '--skip-no-gain'], /option '--skip-no-gain' judges the tensors of a model: give --model <model> with it/],
      [['build', 's3://bucket/model/model.safetensors.index.json', '--out', 'c'], /<model> s3:\/\/bucket\/model\/model\.safetensors\.index\.json: an s3:\/\/ model is the prefix/],
      [['stats', 's3://b/model'], /<model> s3:\/\/b\/model: bucket name "b" is not a valid S3 bucket name/],
      // A mistyped s3:// gets the lower-case hint (until 2026-12-08 "read from local files").
      [['stats', 'S3://bucket/model'], /<model> S3:\/\/bucket\/model looks like a URL, but object stores are s3:\/\/bucket\/prefix \(lower case, two slashes\)/],
      [['build', 'm.safetensors', '--out='], /option '--out' needs a value, got an empty one/],
      [['build', '', '--out', 'c'], /argument <model> needs a value, got an empty one/],
      [['build', 'm.safetensors', '--out', 'a', '--out', 'b'], /option '--out' is given more than once/],
      [['build', 'm.safetensors', '--out', 'c', '--chunk-size', '1e400'], /option '--chunk-size' needs a finite number, got '1e400'/],
      [['--jobs', '2', 'build', 'm.safetensors', '--out', 'c'], /unknown option '--jobs'\noptions go after the command/],
      // Bucket names S3 refuses: usage errors as a bad --out is (they were exit 1, after the model was read).
      [['build', 'm.safetensors', '--out', 's3://b/p'], /--out s3:\/\/b\/p: bucket name "b" is not a valid S3 bucket name/],
      [['build', 'm.safetensors', '--out', 's3://'], /--out s3:\/\/: bucket name "" is not a valid S3 bucket name/],
      [['verify', 's3://Bad_Bucket/c'], /<cache-dir> s3:\/\/Bad_Bucket\/c: bucket name "Bad_Bucket" is not a valid S3 bucket name/],
      [['inspect', 's3:/bucket/c'], /<cache-dir> s3:\/bucket\/c looks like a URL/],
      [['gc', 'S3://bucket/c'], /<cache-dir> S3:\/\/bucket\/c looks like a URL/],
    ];
    for (const [args, pattern] of cases) {
      const result = await runCli(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toMatch(pattern);
      expect(result.stderr).not.toMatch(/^\s+at /m);
      expect(result.stdout).toBe('');
    }
  });
});
