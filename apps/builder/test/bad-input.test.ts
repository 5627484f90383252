// Every bad-input case gives one clear line naming the file (and tensor), a non-zero exit, no
// stack trace (unless --debug), and leaves any cache valid.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeShardedTestModel, writeSingleFileModel, type TempDir } from './helpers/models.js';
import type { BuildJson, InspectJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
let goodModel: string;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
  goodModel = await writeSingleFileModel(join(temp.path, 'good.safetensors'), [gaussianBf16('w0', [64, 64], 1), gaussianBf16('w1', [64, 33], 2)]);
});
afterAll(async () => temp?.cleanup());

/** Exit 1, one line on stderr starting with the command, matching `pattern`, no stack trace. */
function expectOneLineError(result: { code: number | null; stderr: string; stdout: string }, pattern: RegExp): void {
  expect(result.code, result.stderr).toBe(1);
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^splitzip \w+: error: /);
  expect(lines[0]).toMatch(pattern);
  expect(result.stderr).not.toMatch(/^\s+at /m);
}

const isRoot = process.getuid?.() === 0;

function tryMount(args: string[]): boolean {
  try {
    execFileSync('mount', args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('bad model input', () => {
  it('a missing model path', async () => {
    const missing = join(temp.path, 'nope.safetensors');
    const result = await runCli(['build', missing, '--out', join(temp.path, 'c1')]);
    expectOneLineError(result, /PATH_NOT_FOUND/);
    expect(result.stderr).toContain(missing);
    expectOneLineError(await runCli(['stats', missing]), /PATH_NOT_FOUND/);
    expectOneLineError(await runCli(['verify', join(temp.path, 'c1'), '--model', missing]), /PATH_NOT_FOUND|NOT_A_CACHE/);
  });

  it('a directory without safetensors files', async () => {
    const empty = join(temp.path, 'empty-dir');
    await mkdir(empty);
    expectOneLineError(await runCli(['build', empty, '--out', join(temp.path, 'c2')]), /NOT_SAFETENSORS|no .*safetensors/i);
  });

  it('an unreadable path', async () => {
    // As root nothing is unreadable by permission bits; a path through a regular file is.
    const through = join(goodModel, 'inner.safetensors');
    expectOneLineError(await runCli(['build', through, '--out', join(temp.path, 'c3')]), /good\.safetensors/);
  });

  it('truncated and malformed shards give the adapter typed error, with the file', async () => {
    const bytes = await readFile(goodModel);
    const cases: [string, Uint8Array, RegExp][] = [
      ['tiny.safetensors', bytes.subarray(0, 5), /HEADER_LENGTH_MISSING/],
      ['cut-header.safetensors', bytes.subarray(0, 40), /HEADER_OUT_OF_BOUNDS/],
      ['cut-data.safetensors', bytes.subarray(0, bytes.length - 100), /DATA_OUT_OF_BOUNDS|DATA_TRAILING_BYTES/],
      ['huge-length.safetensors', Buffer.concat([Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), bytes.subarray(8)]), /HEADER_TOO_LARGE/],
      ['not-json.safetensors', Buffer.concat([Buffer.from([8, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('{"a": ?  ')]), /HEADER_INVALID_JSON/],
    ];
    for (const [name, content, pattern] of cases) {
      const path = join(temp.path, name);
      await writeFile(path, content);
      const result = await runCli(['build', path, '--out', join(temp.path, 'c4')]);
      expectOneLineError(result, pattern);
      expect(result.stderr).toContain(name);
    }
  });

  it('an index whose second shard is empty names that shard', async () => {
    const dir = join(temp.path, 'broken-index');
    const { indexPath, shardPaths } = await writeShardedTestModel(dir, [gaussianBf16('a', [64, 64], 5), gaussianBf16('b', [64, 64], 6)], 8200);
    expect(shardPaths.length).toBe(2);
    await writeFile(shardPaths[1]!, new Uint8Array(0));
    const result = await runCli(['build', indexPath, '--out', join(temp.path, 'c5')]);
    expectOneLineError(result, /HEADER_LENGTH_MISSING/);
    expect(result.stderr).toContain('model-00002-of-00002.safetensors');
  });

  it('--debug adds the stack trace', async () => {
    const result = await runCli(['build', join(temp.path, 'nope.safetensors'), '--out', join(temp.path, 'c6'), '--debug']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^\s+at /m);
  });

  it('verify/inspect/gc of something that is not a cache', async () => {
    const notCache = join(temp.path, 'not-a-cache');
    await mkdir(notCache);
    for (const command of ['verify', 'inspect', 'gc']) {
      const result = await runCli([command, notCache]);
      expectOneLineError(result, /NOT_A_CACHE/);
      // The directory named once, and in the build to copy (until 2026-12-07 a third time, `(<dir>/manifest.json does not exist)`).
      expect(result.stderr).toContain(`${notCache} is not a SplitZip cache (no manifest.json in it); \`splitzip build <model> --out ${notCache}\` makes one`);
      expect(result.stderr.split(notCache)).toHaveLength(3);
      expect(result.stderr).toContain(`\`splitzip build <model> --out ${notCache}\` makes one`);
      expect(result.stderr).not.toContain('create: true');
    }
    // A file where the cache should be: the same code, said as such, and no build suggestion into it.
    const file = join(temp.path, 'weights.bin');
    await writeFile(file, 'not a cache');
    for (const command of ['verify', 'inspect', 'gc']) {
      const result = await runCli([command, file]);
      expectOneLineError(result, /NOT_A_CACHE/);
      expect(result.stderr).toContain(`${file} is not a SplitZip cache (it is a file, not a directory)`);
      expect(result.stderr).not.toContain('makes one');
    }
    // A path under that file: it does not exist, and it is its parent that is the file (it was
    // called a file itself).
    const under = join(file, 'sub', 'cache');
    for (const command of ['verify', 'inspect', 'gc']) {
      const result = await runCli([command, under]);
      expectOneLineError(result, /NOT_A_CACHE/);
      expect(result.stderr).toContain(`${under} is not a SplitZip cache: it does not exist, and a parent of it, ${file}, is a file, not a directory`);
      expect(result.stderr).not.toContain('(it is a file');
    }
  });

  it('verify/inspect/gc of a directory with a space in its path: the build to copy quotes it', async () => {
    // It read `splitzip build <model> --out /tmp/…/empty dir`: two arguments once pasted.
    const spaced = join(temp.path, 'empty dir');
    await mkdir(spaced);
    for (const command of ['verify', 'inspect', 'gc']) {
      const result = await runCli([command, spaced]);
      expectOneLineError(result, /NOT_A_CACHE/);
      expect(result.stderr).toContain(`\`splitzip build <model> --out '${spaced}'\` makes one`);
    }
  });

  it('verify/inspect/gc of a symbolic link to a missing directory: a usage error naming the link and its target, no build suggested', async () => {
    // It read "no manifest.json in it; `splitzip build <model> --out …` makes one", and that build failed too.
    const missing = join(temp.path, 'unmounted', 'cache');
    const link = join(temp.path, 'cache-link');
    await symlink(missing, link);
    for (const command of ['verify', 'inspect', 'gc']) {
      const result = await runCli([command, link]);
      expect(result.code, result.stderr).toBe(2);
      const line = `the cache ${link} is a symbolic link to ${missing}, which does not exist (a disk not mounted, or a directory moved or removed): mount or create ${missing}, or give another path`;
      expect(result.stderr).toBe(`splitzip ${command}: ${line}\nRun 'splitzip ${command} --help' for usage.\n`);
      const { json } = await runJson<{ error: Record<string, unknown> }>([command, link], 2);
      expect(json.error).toEqual({ code: 'USAGE', message: line, file: link, reason: 'out-is-dangling-link', linkTarget: missing });
    }
  });
});

describe('a cache that cannot be written', () => {
  it('--out naming a regular file, or a path under one: a usage error (exit 2) saying so, USAGE in --json; it was NOT_WRITABLE', async () => {
    // A file given as --out is a wrong argument, not a permission problem: it read
    // `NOT_WRITABLE: cannot write the cache directory …: … is not a directory`.
    const file = join(temp.path, 'out-file.bin');
    await writeFile(file, 'not a directory');
    const under = join(file, 'sub', 'cache');
    const cases = [
      [file, `splitzip build: option '--out' ${file} is a file, not a directory: give the cache's directory (an existing cache, or a path where a new one is created)`, { reason: 'out-is-file' }],
      [under, `splitzip build: option '--out' ${under} cannot be created: a parent of it, ${file}, is a file, not a directory; give a path under a directory`, { reason: 'parent-is-file', parentFile: file }],
    ] as const;
    await buildOutRefusals(cases);
    expect(await readFile(file, 'utf8')).toBe('not a directory');
  });

  it('--out naming a device (/dev/null): "is not a directory", not "is a file"', async () => {
    await buildOutRefusals([
      ['/dev/null', `splitzip build: option '--out' /dev/null is not a directory: give the cache's directory (an existing cache, or a path where a new one is created)`, { reason: 'out-is-file' }],
      ['/dev/null/cache', `splitzip build: option '--out' /dev/null/cache cannot be created: a parent of it, /dev/null, is not a directory; give a path under a directory`, { reason: 'parent-is-file', parentFile: '/dev/null' }],
    ]);
  });

  it('--out naming a symbolic link to a missing directory, or a path under one: USAGE naming the link and its target; it was IO_ERROR [ENOTDIR]', async () => {
    // A link to a cache on a disk not mounted: stat read it as not made yet, and mkdir then failed.
    const missing = join(temp.path, 'not-mounted', 'cache');
    const link = join(temp.path, 'out-link');
    await symlink(missing, link);
    const relativeLink = join(temp.path, 'out-link-relative');
    await symlink('gone/cache', relativeLink);
    const under = join(link, 'sub');
    const fix = `which does not exist (a disk not mounted, or a directory moved or removed): mount or create ${missing}, or give another path`;
    await buildOutRefusals([
      [link, `splitzip build: option '--out' ${link} is a symbolic link to ${missing}, ${fix}`, { reason: 'out-is-dangling-link', linkTarget: missing }],
      [
        relativeLink,
        `splitzip build: option '--out' ${relativeLink} is a symbolic link to gone/cache (${join(temp.path, 'gone', 'cache')}), which does not exist (a disk not mounted, or a directory moved or removed): mount or create ${join(temp.path, 'gone', 'cache')}, or give another path`,
        { reason: 'out-is-dangling-link', linkTarget: 'gone/cache' },
      ],
      [under, `splitzip build: option '--out' ${under} cannot be reached: a parent of it, ${link}, is a symbolic link to ${missing}, ${fix}`, { reason: 'parent-is-dangling-link', parentLink: link, linkTarget: missing }],
    ]);
  });

  /** Each `[out, line, details]`: build with that --out exits 2 with the line, and USAGE with the details in --json. */
  async function buildOutRefusals(cases: readonly (readonly [string, string, Record<string, unknown>])[]): Promise<void> {
    for (const [out, line, details] of cases) {
      const result = await runCli(['build', goodModel, '--out', out]);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toBe(`${line}\nRun 'splitzip build --help' for usage.\n`);
      const { json } = await runJson<{ error: Record<string, unknown> }>(['build', goodModel, '--out', out], 2);
      expect(json.error).toEqual({ code: 'USAGE', message: line.replace('splitzip build: ', ''), file: out, ...details });
    }
  }

  it.skipIf(!isRoot)('a read-only file system (tmpfs mounted ro; needs root)', async () => {
    const mountPoint = join(temp.path, 'ro');
    await mkdir(mountPoint);
    expect(tryMount(['-t', 'tmpfs', '-o', 'size=1m,ro', 'tmpfs', mountPoint])).toBe(true);
    try {
      const result = await runCli(['build', goodModel, '--out', join(mountPoint, 'cache')]);
      expectOneLineError(result, /cannot write the cache directory .*ro\/cache.*read-only|EROFS/);
    } finally {
      execFileSync('umount', [mountPoint]);
    }
  });

  it.skipIf(!isRoot)('a cache made read-only (a bind mount remounted ro): build --json and gc say NOT_WRITABLE, not TENSOR_FAILED or IO_ERROR', async () => {
    const cacheDir = join(temp.path, 'ro-cache');
    expect((await runJson<BuildJson>(['build', goodModel, '--out', cacheDir])).json.encoded).toBe(2);
    const other = await writeSingleFileModel(join(temp.path, 'ro-other.safetensors'), [gaussianBf16('x0', [64, 64], 31), gaussianBf16('x1', [64, 48], 32)]);
    expect(tryMount(['--bind', cacheDir, cacheDir])).toBe(true);
    try {
      expect(tryMount(['-o', 'remount,bind,ro', cacheDir])).toBe(true);
      // Was: {"code":"TENSOR_FAILED","message":"IO_ERROR: cannot write the blob [EROFS] … (tensor x0)"}.
      const { result, json } = await runJson<{ error: { code: string; message: string } }>(['build', other, '--out', cacheDir, '--jobs', '0'], 1);
      expect(json.error.code, result.stderr).toBe('NOT_WRITABLE');
      expect(json.error.message).toContain(`cannot write the cache directory ${cacheDir}`);
      expect(json.error.message).toMatch(/EROFS/);
      // Was: IO_ERROR: cannot create the lock file [EROFS].
      const gc = await runJson<{ error: { code: string; message: string } }>(['gc', cacheDir], 1);
      expect(gc.json.error.code, gc.result.stderr).toBe('NOT_WRITABLE');
      expect(gc.result.stderr).toMatch(/^splitzip gc: error: NOT_WRITABLE: cannot write the cache directory .*EROFS/);
      // The store's NOT_WRITABLE (since 2026-12-07) passes through with its code and path once. Was:
      // "NOT_WRITABLE: cannot write the cache directory X: NOT_WRITABLE: cannot create the lock file: … [EROFS] (file X/lock)".
      expect(gc.result.stderr).toBe(
        `splitzip gc: error: NOT_WRITABLE: cannot write the cache directory ${cacheDir}: cannot create the lock file: the file system is read-only [EROFS] (${join(cacheDir, 'lock')})\n`,
      );
      for (const message of [json.error.message, gc.json.error.message]) {
        expect(message.match(/NOT_WRITABLE/g), message).toHaveLength(1);
        expect(message).not.toContain('(file ');
      }
    } finally {
      execFileSync('umount', [cacheDir]);
    }
  });

  it.skipIf(!isRoot)('a full disk: clear message naming cache and tensor, exit 1, the cache stays valid', async () => {
    const mountPoint = join(temp.path, 'small');
    await mkdir(mountPoint);
    // A first model that fits (two ~0.1 MiB payloads), then one of ten ~0.4 MiB payloads that does
    // not: its blobs are written several at a time, so how many of them commit before the disk is
    // full depends on timing (none, at times), but what the first build stored must stay intact.
    const small = await writeSingleFileModel(
      join(temp.path, 'fits.safetensors'),
      Array.from({ length: 2 }, (_, i) => gaussianBf16(`fits.${i}.weight`, [256, 256], 680 + i)),
    );
    const tensors = Array.from({ length: 10 }, (_, i) => gaussianBf16(`layer.${i}.weight`, [512, 512], 700 + i));
    const model = await writeSingleFileModel(join(temp.path, 'big.safetensors'), tensors);
    expect(tryMount(['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mountPoint])).toBe(true);
    try {
      const cacheDir = join(mountPoint, 'cache');
      expect((await runJson<BuildJson>(['build', small, '--out', cacheDir])).json.encoded).toBe(2);
      const result = await runCli(['build', model, '--out', cacheDir, '--jobs', '1', '--inline-max-mib', '0']);
      expectOneLineError(result, /no space left on device while writing the cache/);
      expect(result.stderr).toContain(cacheDir);
      expect(result.stderr).toMatch(/tensor layer\.\d+\.weight/);
      // Everything committed before the disk filled is intact: the first model's entries at least.
      const { json } = await runJson<VerifyJson>(['verify', cacheDir]);
      expect(json.ok).toBe(true);
      expect(json.store.checked).toBeGreaterThanOrEqual(2);
      expect(json.store.checked).toBeLessThan(12);
      const first = await runJson<VerifyJson>(['verify', cacheDir, '--model', small]);
      expect(first.json.ok).toBe(true);
    } finally {
      execFileSync('umount', [mountPoint]);
    }
  });
});

describe('a build stopped by Ctrl-C', () => {
  it('exits 130 with a clear line and leaves a cache the next run completes', async () => {
    const tensors = Array.from({ length: 48 }, (_, i) => gaussianBf16(`layer.${i}.weight`, [512, 512], 900 + i));
    const model = await writeSingleFileModel(join(temp.path, 'sigint.safetensors'), tensors);
    const cacheDir = join(temp.path, 'cache-sigint');
    const { startCli, collect } = await import('./helpers/run-cli.js');
    const child = startCli(['build', model, '--out', cacheDir, '--jobs', '1', '--inline-max-mib', '0']);
    const done = collect(child, 60_000);
    // Interrupt once the first blob exists (the build is under way).
    const { waitForBlobs } = await import('./helpers/wait.js');
    await waitForBlobs(cacheDir, 1, 30_000);
    child.kill('SIGINT');
    const result = await done;
    expect(result.code, result.stderr).toBe(130);
    expect(result.stderr).toMatch(/interrupted by SIGINT; the cache holds every entry committed so far/);
    const { json } = await runJson<BuildJson>(['build', model, '--out', cacheDir]);
    expect(json.encoded + json.cached).toBe(48);
    expect(json.cached).toBeGreaterThan(0);
  });

  it('with --json prints the report of what it finished, marked interrupted (it printed nothing)', async () => {
    const tensors = Array.from({ length: 48 }, (_, i) => gaussianBf16(`layer.${i}.weight`, [512, 512], 2900 + i));
    const model = await writeSingleFileModel(join(temp.path, 'sigint-json.safetensors'), tensors);
    const cacheDir = join(temp.path, 'cache-sigint-json');
    const { startCli, collect } = await import('./helpers/run-cli.js');
    const { waitForBlobs } = await import('./helpers/wait.js');
    const child = startCli(['build', model, '--out', cacheDir, '--jobs', '1', '--inline-max-mib', '0', '--json']);
    const done = collect(child, 60_000);
    await waitForBlobs(cacheDir, 1, 30_000);
    child.kill('SIGINT');
    const result = await done;
    expect(result.code, result.stderr).toBe(130);
    expect(result.stderr).toMatch(/^splitzip build: error: interrupted by SIGINT; the cache holds every entry committed so far/);
    // One document: the report of what it finished, with the error every --json error exit prints.
    const partial = JSON.parse(result.stdout) as BuildJson & { error?: unknown };
    expect(partial.interrupted).toBe(true);
    expect(Object.keys(partial)[0]).toBe('interrupted');
    expect(partial.error).toEqual({ code: 'INTERRUPTED', message: expect.stringMatching(/^interrupted by SIGINT; the cache holds every entry committed so far/), signal: 'SIGINT' });
    expect(partial.tensors.length).toBeGreaterThan(0);
    expect(partial.tensors.length).toBeLessThan(48);
    expect(partial.encoded + partial.cached + partial.skipped_coverage + partial.skipped_dtype + partial.skipped_size + partial.skipped_no_gain).toBe(partial.tensors.length);
    // What it reports encoded is what the cache holds.
    const { json: inspect } = await runJson<InspectJson>(['inspect', cacheDir]);
    expect(inspect.entries.map((e) => e.key).sort()).toEqual(partial.tensors.filter((t) => t.status === 'encoded').map((t) => t.key).sort());
    // A build that finishes says nothing of the kind.
    const { json } = await runJson<BuildJson>(['build', model, '--out', cacheDir]);
    expect(json.interrupted).toBeUndefined();
    expect(json.cached).toBe(partial.encoded);
  });

  it('a second Ctrl-C stops at once and says what may be left (it exited without a word)', async () => {
    // Large tensors: the first Ctrl-C waits for the tensor in flight, so the second one comes while
    // the build still runs. Two signals of one kind pending at once are merged into one by the
    // kernel: an attempt where that happened (a plain interrupt) is run again, at most 3 times.
    const tensors = Array.from({ length: 8 }, (_, i) => gaussianBf16(`layer.${i}.weight`, [2048, 2048], 1900 + i));
    const model = await writeSingleFileModel(join(temp.path, 'sigint2.safetensors'), tensors);
    const { startCli, collect } = await import('./helpers/run-cli.js');
    const { waitForBlobs } = await import('./helpers/wait.js');
    let stderr = '';
    for (let attempt = 0; attempt < 3 && !stderr.includes('second SIGINT'); attempt++) {
      const cacheDir = join(temp.path, `cache-sigint2-${attempt}`);
      const child = startCli(['build', model, '--out', cacheDir, '--jobs', '1', '--inline-max-mib', '0']);
      const done = collect(child, 60_000);
      await waitForBlobs(cacheDir, 1, 30_000);
      child.kill('SIGINT');
      await new Promise((resolve) => setTimeout(resolve, 5));
      child.kill('SIGINT');
      const result = await done;
      expect(result.code, result.stderr).toBe(130);
      expect((await runJson<VerifyJson>(['verify', cacheDir])).json.ok).toBe(true);
      stderr = result.stderr;
    }
    // The real cache path, not a placeholder.
    expect(stderr).toContain('stopped at once by a second SIGINT; committed entries are kept, and `splitzip gc ');
    expect(stderr).toMatch(/`splitzip gc \S*cache-sigint2-\d` removes any temp files left behind/);
    // Not a TTY: no blank line first (one is for a progress bar mid-line), and the command's prefix.
    expect(stderr).toMatch(/^splitzip build: stopped at once by a second SIGINT; /);
  });
});

describe("another writer's lock held past the store's 30 s wait", () => {
  it('build --json says LOCK_TIMEOUT, not TENSOR_FAILED (the commit of the tensor in flight met it)', { timeout: 120_000 }, async () => {
    const { spawn } = await import('node:child_process');
    const { hostname } = await import('node:os');
    const cacheDir = join(temp.path, 'lock-held');
    expect((await runCli(['build', goodModel, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const other = await writeSingleFileModel(join(temp.path, 'lock-other.safetensors'), [gaussianBf16('y0', [64, 64], 41)]);
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120000)'], { stdio: 'ignore' });
    try {
      await writeFile(join(cacheDir, 'lock'), JSON.stringify({ pid: holder.pid, host: hostname(), bootId: null, startTicks: null, token: '0123456789abcdef', createdMs: Date.now() }));
      const { result, json } = await runJson<{ error: { code: string; message: string } }>(['build', other, '--out', cacheDir, '--jobs', '0'], 1);
      // Was: {"code":"TENSOR_FAILED","message":"LOCK_TIMEOUT: … (tensor y0)"}.
      expect(json.error.code, result.stderr).toBe('LOCK_TIMEOUT');
      expect(result.stderr).toMatch(/^splitzip build: error: LOCK_TIMEOUT: /m);
      // The CLI's words: the wait once, in seconds, the holder to check and what to run after.
      expect(json.error.message).toMatch(new RegExp(`^LOCK_TIMEOUT: gave up after waiting 30 s for the writer lock of .*, held by pid ${holder.pid} on .*\\(this host; .*\`ps -p ${holder.pid}\`\\); .*\`splitzip gc `));
      expect(json.error.message.match(/\b30 s\b/g)).toHaveLength(1);
    } finally {
      holder.kill('SIGKILL');
    }
  });
});

describe('a second signal during gc --drop-unbound-entries', () => {
  it("says what a gc may leave (orphan blobs of dropped entries, its lock) and names the cache (it said a build's words, `<cache>`)", { timeout: 90_000 }, async () => {
    const { spawn } = await import('node:child_process');
    const { hostname } = await import('node:os');
    const { startCli, collect } = await import('./helpers/run-cli.js');
    const cacheDir = join(temp.path, 'gc-signal2');
    expect((await runCli(['build', goodModel, '--out', cacheDir, '--quiet'])).code).toBe(0);
    // A live writer holds the lock: the gc waits for it, so the signals come while it runs.
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120000)'], { stdio: 'ignore' });
    try {
      await writeFile(join(cacheDir, 'lock'), JSON.stringify({ pid: holder.pid, host: hostname(), bootId: null, startTicks: null, token: '0123456789abcdef', createdMs: Date.now() }));
      let stderr = '';
      // Two signals of one kind pending at once merge into one: SIGTERM then SIGINT cannot (the
      // process may take them in either order: either is the second). An attempt whose second came
      // after the exit (a plain interrupt) is run again, at most 3 times.
      for (let attempt = 0; attempt < 3 && !/second SIG(INT|TERM)/.test(stderr); attempt++) {
        const child = startCli(['gc', cacheDir, '--drop-unbound-entries']);
        let seen = '';
        child.stderr!.on('data', (chunk: Buffer) => (seen += chunk.toString()));
        const done = collect(child, 60_000);
        for (let i = 0; i < 1500 && !seen.includes('waiting for the writer lock'); i++) await new Promise((resolve) => setTimeout(resolve, 20));
        child.kill('SIGTERM');
        child.kill('SIGINT');
        stderr = (await done).stderr;
      }
      const second = /second (SIGINT|SIGTERM)/.exec(stderr)?.[1] ?? 'SIGINT';
      expect(stderr).toContain(
        `splitzip gc: stopped at once by a second ${second}; the cache stays valid, but may hold the blobs of entries it had dropped (orphans: no entry references them), temp files, and this process's writer lock (its holder now dead): the next \`splitzip gc ${cacheDir}\` removes them (\`splitzip verify ${cacheDir}\` notes them)`,
      );
      expect(stderr).not.toContain('<cache>');
      expect(stderr).not.toContain('committed entries are kept');
    } finally {
      holder.kill('SIGKILL');
    }
  });
});

describe('a model without tensors', () => {
  it('builds nothing, with a warning (an index whose weight_map is empty)', async () => {
    const dir = join(temp.path, 'empty-index');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: {} }));
    const result = await runCli(['build', dir, '--out', join(temp.path, 'cache-empty-index'), '--quiet']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/^splitzip build: warning: the model .* has no tensors; nothing was cached$/m);
  });
});
