// The CLI's error rendering and exit statuses, in process: interrupts (130, 143), help for an
// unknown command, one-line messages that name the tensor and the right culprit.
import { mkdir, readdir, realpath, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SafetensorsError } from '@splitzip/safetensors';
import { openCacheStore, StoreError } from '@splitzip/store';
import { describeError, dropRepeats, mentions } from '../src/describe-error.js';
import { formatBytes } from '../src/format-units.js';
import { runCli } from '../src/run-cli.js';
import { wrapBuildError, wrapCacheWriteError } from '../src/wrap-build-error.js';
import { BuilderError } from '../src/errors.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { memoryIo } from './helpers/run-in-process.js';
import { buildCache } from '../src/build-cache.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-cli-errors-');
});
afterAll(async () => temp?.cleanup());

function abortedBy(signal: 'SIGINT' | 'SIGTERM'): AbortSignal {
  const controller = new AbortController();
  controller.abort(Object.assign(new Error(`interrupted by ${signal}`), { signal }));
  return controller.signal;
}

describe('interrupts', () => {
  let cacheDir: string;
  beforeAll(async () => {
    const model = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [gaussianBf16('w', [4000], 1), gaussianBf16('v', [3000], 2)]);
    cacheDir = join(temp.path, 'cache');
    const { io } = memoryIo();
    expect(await runCli(['build', model, '--out', cacheDir, '--jobs', '0', '--quiet'], { io })).toBe(0);
  });

  it('verify stops at Ctrl-C (130) and at SIGTERM (143), saying so on one line', async () => {
    for (const [name, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
      const { io, out, err } = memoryIo();
      expect(await runCli(['verify', cacheDir], { io, signal: abortedBy(name) })).toBe(code);
      expect(err().trim()).toBe(`splitzip verify: error: interrupted by ${name}`);
      expect(out()).toBe('');
    }
  });

  it('inspect, stats and gc stop at Ctrl-C (130) and SIGTERM (143) once the cache is open, as verify does (inspect printed its whole report, exit 0)', async () => {
    const model = join(temp.path, 'm.safetensors');
    for (const argv of [['inspect', cacheDir], ['inspect', cacheDir, '--json'], ['inspect', cacheDir, '--model', model], ['stats', model], ['gc', cacheDir, '--dry-run']]) {
      for (const [name, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
        const { io, out, err } = memoryIo();
        expect(await runCli(argv, { io, signal: abortedBy(name) }), `${argv.join(' ')} ${name}: ${err()}`).toBe(code);
        expect(err().trim()).toBe(`splitzip ${argv[0]}: error: interrupted by ${name}`);
        // --json: the one document is the error's, no report.
        if (argv.includes('--json')) expect(JSON.parse(out())).toEqual({ error: { code: 'INTERRUPTED', message: `interrupted by ${name}`, signal: name } });
        else expect(out()).toBe('');
      }
    }
  });

  it("the store's verify stops before the next entry once the signal is aborted, with its reason", async () => {
    const store = await openCacheStore(cacheDir, { create: false });
    try {
      const controller = new AbortController();
      const reason = new Error('stop');
      let seen = 0;
      const verifying = store.verify({
        decode: true,
        signal: controller.signal,
        onProgress: () => {
          seen++;
          controller.abort(reason);
        },
      });
      await expect(verifying).rejects.toBe(reason);
      expect(seen).toBe(1);
    } finally {
      await store.close();
    }
  });

  it('build exits 143 for SIGTERM too', async () => {
    const { io } = memoryIo();
    const model = await writeSingleFileModel(join(temp.path, 'm2.safetensors'), [gaussianBf16('u', [100], 3)]);
    expect(await runCli(['build', model, '--out', join(temp.path, 'c2'), '--quiet'], { io, signal: abortedBy('SIGTERM') })).toBe(143);
  });
});

describe('interrupts while an S3 endpoint stalls', () => {
  it('inspect, verify, gc and build stop at SIGTERM (143) though the server never answers', async () => {
    process.env.AWS_ACCESS_KEY_ID ??= 'test';
    process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    }); // accepts, reads, never answers
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    // Both variables the SDK reads (the _S3 one wins where set): every request goes to the silent server.
    const saved = { AWS_ENDPOINT_URL: process.env.AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3: process.env.AWS_ENDPOINT_URL_S3 };
    process.env.AWS_ENDPOINT_URL = process.env.AWS_ENDPOINT_URL_S3 = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const model = await writeSingleFileModel(join(temp.path, 'm3.safetensors'), [gaussianBf16('t', [100], 4)]);
      for (const argv of [['inspect', 's3://stalled/c'], ['verify', 's3://stalled/c'], ['gc', 's3://stalled/c', '--min-age', '1h'], ['build', model, '--out', 's3://stalled/c', '--quiet']]) {
        const controller = new AbortController();
        setTimeout(() => controller.abort(Object.assign(new Error('interrupted by SIGTERM'), { signal: 'SIGTERM' })), 300);
        const { io, err } = memoryIo();
        const started = performance.now();
        const code = await runCli(argv, { io, signal: controller.signal });
        expect(code, `${argv[0]}: ${err()}`).toBe(143);
        expect(err().trim(), argv[0]).toBe(`splitzip ${argv[0]}: error: interrupted by SIGTERM`);
        expect(performance.now() - started).toBeLessThan(10_000);
      }
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  }, 60_000);
});

describe('help', () => {
  it('for an unknown command is a usage error, like the unknown command itself', async () => {
    for (const argv of [['help', 'nope'], ['--help', 'nope'], ['nope']]) {
      const { io, err } = memoryIo();
      expect(await runCli(argv, { io }), argv.join(' ')).toBe(2);
      expect(err()).toMatch(/unknown command 'nope'/);
    }
    const { io, out } = memoryIo();
    expect(await runCli(['help'], { io })).toBe(0);
    expect(out()).toMatch(/^ {2}build /m);
  });
});

describe('a mistyped command', () => {
  it('suggests the command most likely meant, as a mistyped option does; an option first is called one', async () => {
    for (const argv of [['buld'], ['help', 'buld'], ['--help', 'verfy']]) {
      const { io, err } = memoryIo();
      expect(await runCli(argv, { io }), argv.join(' ')).toBe(2);
      const near = argv.at(-1) === 'buld' ? 'build' : 'verify';
      expect(err()).toContain(`splitzip: unknown command '${argv.at(-1)}': did you mean '${near}'?`);
    }
    const bogus = memoryIo();
    expect(await runCli(['--bogus'], { io: bogus.io })).toBe(2);
    expect(bogus.err()).toMatch(/^splitzip: unknown option '--bogus'\n/);
    expect(bogus.err()).not.toContain('unknown command');
    const before = memoryIo();
    expect(await runCli(['--jobs', '2', 'build', 'm', '--out', 'c'], { io: before.io })).toBe(2);
    expect(before.err()).toBe("splitzip: unknown option '--jobs'\noptions go after the command: splitzip <command> [arguments] [options]\n");
  });

  it('help takes one command: `help build extra` is a usage error (the extra word was dropped)', async () => {
    for (const argv of [['help', 'build', 'extra'], ['--help', 'gc', 'x', 'y']]) {
      const { io, out, err } = memoryIo();
      expect(await runCli(argv, { io }), argv.join(' ')).toBe(2);
      expect(err()).toContain(`unexpected argument '${argv[2]}'`);
      expect(out()).toBe('');
    }
  });
});

describe('a cache directory in the model', () => {
  it("is refused (USAGE, exit 2) naming both paths, before anything is made: the model's directory, one inside it, through a symlink, a file model's directory", async () => {
    const dir = join(temp.path, 'model-tree');
    const { indexPath } = await writeShardedTestModel(dir, [gaussianBf16('a', [400], 21), gaussianBf16('b', [400], 22)], 900);
    await mkdir(join(dir, 'sub'));
    await symlink(dir, join(temp.path, 'model-link'));
    await mkdir(join(temp.path, 'file-model'));
    const file = await writeSingleFileModel(join(temp.path, 'file-model', 'm.safetensors'), [gaussianBf16('w', [200], 23)]);
    const realDir = await realpath(dir);
    const cases: [string, string][] = [
      [dir, dir],
      [indexPath, dir],
      [dir, join(dir, 'cache')],
      [dir, join(dir, 'sub', 'new', 'cache')],
      [dir, join(temp.path, 'model-link', 'cache')],
      [join(temp.path, 'model-link'), join(dir, 'sub')],
      [file, join(temp.path, 'file-model')],
      // A child whose name starts with `..` is inside (relative() gives '..cache', not a `../` path).
      [dir, join(dir, '..cache')],
    ];
    for (const [model, out] of cases) {
      const before = await readdir(dirname(model === file ? file : dir), { recursive: true });
      const { io, err } = memoryIo();
      expect(await runCli(['build', model, '--out', out, '--jobs', '0', '--quiet'], { io }), `${model} --out ${out}: ${err()}`).toBe(2);
      expect(err(), out).toMatch(/^splitzip build: the cache directory .* (is the model's directory|is inside the model's directory|is the directory of the model's file) /);
      expect(err(), out).toContain(out);
      expect(err(), out).toContain(model === file ? await realpath(dirname(file)) : realDir);
      expect(await readdir(dirname(model === file ? file : dir), { recursive: true }), out).toEqual(before);
    }
    // The library refuses it the same way.
    await expect(buildCache({ model: dir, cacheDir: join(dir, 'cache'), jobs: 0 })).rejects.toMatchObject({ code: 'USAGE', context: { modelDir: realDir } });
    // Beside a single file's directory, and outside the model (a sibling whose name extends the
    // model's, a path through `..`), is fine.
    expect(await runCli(['build', file, '--out', join(temp.path, 'file-model', 'cache'), '--jobs', '0', '--quiet'], { io: memoryIo().io })).toBe(0);
    expect(await runCli(['build', dir, '--out', `${dir}2`, '--jobs', '0', '--quiet'], { io: memoryIo().io })).toBe(0);
    expect(await runCli(['build', dir, '--out', join(dir, '..', 'model-tree-up'), '--jobs', '0', '--quiet'], { io: memoryIo().io })).toBe(0);
    expect(await runCli(['build', dir, '--out', join(temp.path, 'model-tree-cache'), '--jobs', '0', '--quiet'], { io: memoryIo().io })).toBe(0);
  });

  // The hint names verify whatever the command: `gc <cache> --model <dir>` removes bindings.
  it('verify, inspect and gc given a model directory say it looks like one and name `verify <cache> --model <dir>` (not a build into it)', async () => {
    const dir = join(temp.path, 'model-as-cache');
    await writeShardedTestModel(dir, [gaussianBf16('a', [400], 31), gaussianBf16('b', [400], 32)], 900);
    for (const command of ['verify', 'inspect', 'gc']) {
      const { io, err } = memoryIo();
      expect(await runCli([command, dir], { io }), err()).toBe(1);
      expect(err()).toMatch(new RegExp(`^splitzip ${command}: error: NOT_A_CACHE: .*model-as-cache is not a SplitZip cache: it looks like a model directory: it holds model-00001-of-00002\\.safetensors, `));
      expect(err()).toContain(`\`splitzip verify <cache> --model ${dir}\``);
      expect(err()).not.toContain('makes one');
    }
    // A directory without a model keeps its hint to build one.
    const { io, err } = memoryIo();
    expect(await runCli(['verify', temp.path + '/no-such'], { io })).toBe(1);
    expect(err()).toContain('makes one');
  });
});

describe('--json on an error exit', () => {
  it('prints one JSON document with the error on stdout (it printed nothing), the line on stderr as before', async () => {
    const model = await writeSingleFileModel(join(temp.path, 'json-errors.safetensors'), [gaussianBf16('w', [300], 11)]);
    const missing = join(temp.path, 'no-such-cache');
    const cases: [string[], number, string][] = [
      [['build', join(temp.path, 'no-such-model.safetensors'), '--out', join(temp.path, 'json-c1'), '--json'], 1, 'PATH_NOT_FOUND'],
      // A usage error found once --json was parsed.
      [['build', model, '--out', join(temp.path, 'json-c2'), '--chunk-size', '1000', '--json'], 2, 'USAGE'],
      [['verify', missing, '--json'], 1, 'NOT_A_CACHE'],
      [['inspect', missing, '--json'], 1, 'NOT_A_CACHE'],
      [['gc', missing, '--json'], 1, 'NOT_A_CACHE'],
      [['stats', join(temp.path, 'no-such-model.safetensors'), '--json'], 1, 'PATH_NOT_FOUND'],
      [['gc', 's3://bucket/c', '--min-age', '1m', '--json'], 2, 'USAGE'],
    ];
    for (const [argv, code, errorCode] of cases) {
      const { io, out, err } = memoryIo();
      expect(await runCli(argv, { io }), `${argv.join(' ')}: ${err()}`).toBe(code);
      const document = JSON.parse(out()) as { error: { code: string; message: string } };
      expect(Object.keys(document), argv.join(' ')).toEqual(['error']);
      expect(document.error.code, argv.join(' ')).toBe(errorCode);
      // The message is stderr's line after its prefix.
      expect(err(), argv.join(' ')).toContain(`splitzip ${argv[0]}: ${code === 1 ? 'error: ' : ''}${document.error.message}\n`);
    }
    // The context of a typed error comes along (a store error's path).
    const { io, out } = memoryIo();
    await runCli(['verify', missing, '--json'], { io });
    expect((JSON.parse(out()) as { error: { path: string } }).error.path).toBe(join(missing, 'manifest.json'));
    // A usage error of the parser's, where --json is among the words: its document too (stdout was empty).
    const early = memoryIo();
    expect(await runCli(['build', model, '--jobs', 'many', '--json'], { io: early.io })).toBe(2);
    expect(JSON.parse(early.out())).toEqual({ error: { code: 'USAGE', message: "option '--jobs' needs a number, got 'many'" } });
  });
});

describe('error lines', () => {
  it('name the tensor even when its name occurs inside another word of the message', () => {
    const error = new BuilderError('TENSOR_FAILED', 'IO_ERROR: cannot write the blob [EACCES]', { tensor: 'a' });
    expect(describeError(error)).toBe('IO_ERROR: cannot write the blob [EACCES] (tensor a)');
    expect(mentions('the slice key of tensor z1 (its shard name)', 'z1')).toBe(true);
    // The builder's own codes lead its lines, as the store's and the adapter's do (README names SETTINGS_MISMATCH).
    expect(describeError(new BuilderError('SETTINGS_MISMATCH', 'the cache c gates at coverage 0.99'))).toBe('SETTINGS_MISMATCH: the cache c gates at coverage 0.99');
    expect(describeError(new BuilderError('INTERRUPTED', 'stopped by SIGINT'))).toBe('stopped by SIGINT');
    expect(mentions('cannot write the blob', 'a')).toBe(false);
    expect(mentions('layer.5.weight failed', 'layer.5')).toBe(false);
    expect(mentions('failed on layer.5.weight', 'layer.5.weight')).toBe(true);
  });

  it('say a code and a path once (the adapter\'s words, then Node\'s, each led by the code)', () => {
    const cause = Object.assign(new Error("EACCES: permission denied, open '/m/x.safetensors'"), { code: 'EACCES', syscall: 'open', path: '/m/x.safetensors' });
    const unreadable = new SafetensorsError('IO_ERROR', `file system error EACCES: ${cause.message}`, { file: '/m/x.safetensors', cause });
    // Was: IO_ERROR: /m/x.safetensors: file system error EACCES: EACCES: permission denied, open '/m/x.safetensors'
    expect(describeError(unreadable)).toBe('IO_ERROR: /m/x.safetensors: file system error EACCES: permission denied');
    // A path the line does not name otherwise stays; so does a code said once.
    expect(dropRepeats("IO_ERROR: cannot read the shard: ENOENT: no such file or directory, open '/m/y'")).toBe("IO_ERROR: cannot read the shard: ENOENT: no such file or directory, open '/m/y'");
    expect(dropRepeats('NO_SPACE: NO_SPACE: disk full')).toBe('NO_SPACE: disk full');
  });

  it("blame the model, not the cache directory, for a model file that cannot be read", () => {
    const cause = Object.assign(new Error("EACCES: permission denied, open '/m/x.safetensors'"), { code: 'EACCES', syscall: 'open', path: '/m/x.safetensors' });
    const unreadable = new SafetensorsError('IO_ERROR', 'file system error EACCES', { file: '/m/x.safetensors', cause });
    expect(wrapBuildError(unreadable, { cacheDir: 'relative/cache' })).toBe(unreadable);
    // A Node error inside the cache (given relative, the error's path absolute) is the cache's.
    const inCache = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES', syscall: 'open', path: join(process.cwd(), 'relative/cache/blobs/x') });
    expect(wrapBuildError(inCache, { cacheDir: 'relative/cache' })).toMatchObject({ code: 'NOT_WRITABLE' });
    const elsewhere = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES', syscall: 'open', path: '/m/model' });
    expect(wrapBuildError(elsewhere, { cacheDir: 'relative/cache' })).toBe(elsewhere);
  });

  it("a read-only cache or another writer's lock met while a tensor was in flight: NOT_WRITABLE and LOCK_TIMEOUT, not TENSOR_FAILED", () => {
    const cacheDir = join(temp.path, 'ro-cache');
    // As the store says it since 2026-12-07 (toWriteError): NOT_WRITABLE, its code and path said once on the line.
    for (const [errno, why] of [['EROFS', 'the file system is read-only'], ['EACCES', 'permission denied']] as const) {
      const blob = join(cacheDir, 'blobs/ab/x');
      const cause = Object.assign(new Error(`${errno}: refused, open '${cacheDir}/blobs/ab/x.tmp'`), { code: errno, syscall: 'open', path: join(cacheDir, 'blobs/ab/x.tmp') });
      const store = new StoreError('NOT_WRITABLE', `cannot write the blob: ${why} [${errno}]`, { entry: 'e1', path: blob, details: { errno, syscall: 'open', path: blob }, cause });
      const wrapped = wrapBuildError(store, { cacheDir, tensor: 'layer.0.weight', file: '/m/model.safetensors' });
      expect(wrapped).toMatchObject({ code: 'NOT_WRITABLE', context: { tensor: 'layer.0.weight', file: cacheDir } });
      // Was: "NOT_WRITABLE: cannot write the cache directory X: NOT_WRITABLE: cannot write the blob: … (entry e1, file X/blobs/ab/x)".
      expect(describeError(wrapped)).toBe(`NOT_WRITABLE: cannot write the cache directory ${cacheDir}: cannot write the blob: ${why} [${errno}] (${blob}) (tensor layer.0.weight)`);
      const lock = join(cacheDir, 'lock');
      const lockError = new StoreError('NOT_WRITABLE', `cannot create the lock file: ${why} [${errno}]`, { path: lock, details: { errno, syscall: 'open', path: lock }, cause });
      expect(describeError(wrapCacheWriteError(lockError, cacheDir))).toBe(`NOT_WRITABLE: cannot write the cache directory ${cacheDir}: cannot create the lock file: ${why} [${errno}] (${lock})`);
    }
    // An older store's IO_ERROR with a refused write's errno: still NOT_WRITABLE, its message whole.
    const oldCause = Object.assign(new Error("EROFS: read-only file system, open 'x.tmp'"), { code: 'EROFS', syscall: 'open', path: join(cacheDir, 'blobs/ab/x.tmp') });
    const old = new StoreError('IO_ERROR', 'cannot write the blob [EROFS]', { entry: 'e1', path: join(cacheDir, 'blobs/ab/x'), details: { errno: 'EROFS' }, cause: oldCause });
    expect((wrapBuildError(old, { cacheDir, tensor: 'w' }) as Error).message).toContain(`cannot write the cache directory ${cacheDir}: IO_ERROR: cannot write the blob [EROFS]`);
    // A genuine IO_ERROR (EIO: a failing disk, not a refused write) is no NOT_WRITABLE: the tensor's failure, the store's code kept.
    const eio = Object.assign(new Error('EIO: i/o error, write'), { code: 'EIO', syscall: 'write', path: join(cacheDir, 'blobs/ab/x.tmp') });
    const io = new StoreError('IO_ERROR', 'cannot write the blob [EIO]', { entry: 'e1', path: join(cacheDir, 'blobs/ab/x'), details: { errno: 'EIO' }, cause: eio });
    const ioWrapped = wrapBuildError(io, { cacheDir, tensor: 'layer.0.weight' });
    expect(ioWrapped).toMatchObject({ code: 'TENSOR_FAILED', context: { tensor: 'layer.0.weight' } });
    expect((ioWrapped as Error).message).toMatch(/^IO_ERROR: cannot write the blob \[EIO\]/);
    expect(wrapCacheWriteError(io, cacheDir)).toBe(io);
    // The same errno on a model's file stays the model's.
    const model = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES', syscall: 'open', path: '/m/model.safetensors' });
    expect(wrapBuildError(model, { cacheDir, tensor: 'w' })).toMatchObject({ code: 'TENSOR_FAILED' });
    const lock = new StoreError('LOCK_TIMEOUT', 'the writer lock is held by pid 123 for 30 s', { path: join(cacheDir, 'lock') });
    expect(wrapBuildError(lock, { cacheDir, tensor: 'layer.0.weight' })).toBe(lock);
  });

  it('a refused read in the cache (another user\'s manifest of mode 0600) stays the store\'s error, and an s3:// cache\'s errors are never NOT_WRITABLE', () => {
    const cacheDir = join(temp.path, 'shared-cache');
    const readCause = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES', syscall: 'open', path: join(cacheDir, 'manifest.json') });
    const read = new StoreError('IO_ERROR', 'cannot read manifest.json', { path: join(cacheDir, 'manifest.json'), cause: readCause });
    expect(wrapCacheWriteError(read, cacheDir)).toBe(read);
    expect(wrapBuildError(read, { cacheDir, tensor: 'w' })).toMatchObject({ code: 'TENSOR_FAILED' });
    // The lock file's creation is a write: NOT_WRITABLE.
    const lockCause = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES', syscall: 'open', path: join(cacheDir, 'lock') });
    expect(wrapCacheWriteError(new StoreError('IO_ERROR', 'cannot create the lock file', { path: join(cacheDir, 'lock'), cause: lockCause }), cacheDir)).toMatchObject({ code: 'NOT_WRITABLE' });
    // A connect EACCES under S3_UNAVAILABLE is the endpoint's, not a read-only cache.
    const connect = Object.assign(new Error('connect EACCES 10.0.0.1:443'), { code: 'EACCES', syscall: 'connect' });
    const s3 = new StoreError('S3_UNAVAILABLE', 'cannot reach the endpoint', { cause: new TypeError('fetch failed', { cause: connect }) });
    expect(wrapCacheWriteError(s3, 's3://bucket/prefix')).toBe(s3);
    expect(wrapCacheWriteError(s3, cacheDir)).toBe(s3);
  });

  it('a cache given through a symlink: an error naming the resolved directory (where the store works) is still the cache\'s', async () => {
    const temp = await createTempDir('builder-symlinked-cache');
    try {
      await mkdir(join(temp.path, 'real-cache'));
      await symlink('real-cache', join(temp.path, 'cache'));
      const inCache = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES', syscall: 'open', path: join(await realpath(join(temp.path, 'real-cache')), 'lock') });
      expect(wrapBuildError(inCache, { cacheDir: join(temp.path, 'cache') })).toMatchObject({ code: 'NOT_WRITABLE' });
    } finally {
      await temp.cleanup();
    }
  });

  it('say a shard rewritten during the build means running the build again (not the reader\'s "open the model again")', () => {
    const changed = new SafetensorsError('SHARD_CHANGED', 'shard "m.safetensors" changed since the model was opened (size:mtime 1:2 -> 1:3): open the model again', {
      file: '/m/m.safetensors',
      tensor: 'layer.0.weight',
    });
    for (const tensor of [undefined, 'layer.0.weight']) {
      const wrapped = wrapBuildError(changed, { cacheDir: 'cache', tensor }) as { code: string; message: string; context: { file?: string; tensor?: string }; cause: unknown };
      expect(wrapped).toMatchObject({ code: 'MODEL_CHANGED', context: { file: '/m/m.safetensors', tensor: 'layer.0.weight' }, cause: changed });
      expect(wrapped.message).toMatch(/rewritten .* while the build read it.*run the build again/);
      expect(wrapped.message).not.toMatch(/open the model again/);
    }
  });

  it('round a rate below one KiB/s', () => {
    expect(formatBytes(44.14808229229024)).toBe('44.1 B');
    expect(formatBytes(0.5)).toBe('0.50 B');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.50 KiB');
  });
});

describe('a damaged manifest', () => {
  // Every command refused it, --repair too, and the line said to move the cache aside and build
  // again; now the other commands name `build --repair`, which salvages what it can and builds on.
  it('verify and inspect name `build --repair`, which brings the cache back (here nothing of the manifest reads)', async () => {
    const model = await writeSingleFileModel(join(temp.path, 'damaged-manifest.safetensors'), [gaussianBf16('w', [400], 5)]);
    const cacheDir = join(temp.path, 'damaged-manifest-cache');
    expect(await runCli(['build', model, '--out', cacheDir, '--jobs', '0', '--quiet'], { io: memoryIo().io })).toBe(0);
    await writeFile(join(cacheDir, 'manifest.json'), '{"format": 2, "generation": ');
    for (const argv of [['verify', cacheDir], ['inspect', cacheDir], ['build', model, '--out', cacheDir, '--jobs', '0']]) {
      const { io, err } = memoryIo();
      expect(await runCli(argv, { io })).toBe(1);
      expect(err()).toMatch(/MANIFEST_INVALID/);
      expect(err()).toContain(`\`splitzip build <model> --out ${cacheDir} --repair\` keeps the entries that still check out`);
    }
    const repaired = memoryIo();
    expect(await runCli(['build', model, '--out', cacheDir, '--repair', '--jobs', '0'], { io: repaired.io })).toBe(0);
    expect(repaired.out().replace(/\n {8}/g, ' ')).toMatch(/manifest damaged \(.*\): kept as .*manifest\.json\.damaged-\d+; 0 entries kept/);
    expect(repaired.err()).toContain("the cache's manifest is damaged (or an older copy): checking the 0 entries it still lists against their blobs");
    expect(await runCli(['verify', cacheDir, '--model', model], { io: memoryIo().io })).toBe(0);
  });

  it('a directory in the manifest\'s place is no damage build --repair can salvage: the line does not offer it', async () => {
    const model = await writeSingleFileModel(join(temp.path, 'dir-manifest.safetensors'), [gaussianBf16('w', [400], 6)]);
    const cacheDir = join(temp.path, 'dir-manifest-cache');
    await mkdir(join(cacheDir, 'manifest.json'), { recursive: true });
    const { io, err } = memoryIo();
    expect(await runCli(['build', model, '--out', cacheDir, '--repair', '--jobs', '0'], { io })).toBe(1);
    expect(err()).toMatch(/MANIFEST_INVALID: manifest\.json is not a regular file/);
    expect(err()).not.toContain('--repair');
  });
});
