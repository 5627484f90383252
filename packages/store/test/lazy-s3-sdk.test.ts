import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));

// Resolve hooks that refuse every AWS SDK module, for import() (an ESM loader hook) and require()
// (the CommonJS resolver): the child process behaves as if the SDK were missing, so a local-cache
// session that touched it would fail.
const BLOCK_SDK = `data:text/javascript,${encodeURIComponent(`
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('@aws-sdk/') || specifier.startsWith('@smithy/')) throw new Error('blocked: ' + specifier);
  return next(specifier, context);
}`)}`;
const BLOCK_SDK_REQUIRE = `
const Module = createRequire(import.meta.url)('node:module');
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request.startsWith('@aws-sdk/') || request.startsWith('@smithy/')) throw new Error('blocked: ' + request);
  return resolveFilename.call(this, request, ...rest);
};`;

function runChild(script: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { createRequire, register } from 'node:module'; register(${JSON.stringify(BLOCK_SDK)}); ${BLOCK_SDK_REQUIRE} const store = await import(${JSON.stringify(DIST)}); ${script}`,
    ],
    { encoding: 'utf8', env: { ...process.env, AWS_ENDPOINT_URL: 'http://127.0.0.1:9' } },
  );
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('the AWS SDK loads on first S3 use only', () => {
  it('a local cache is created, written and read without loading the SDK', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'splitzip-lazy-sdk-'));
    try {
      const { status, stdout, stderr } = runChild(`
        const cache = await store.openCacheStore(${JSON.stringify(join(dir, 'cache'))}, { create: true });
        console.log(cache.entryCount ?? [...cache.entries()].length);
        await cache.close();`);
      expect(stderr).toBe('');
      expect(status).toBe(0);
      expect(stdout.trim()).toBe('0');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a local cache session loads neither node:http nor node:https (only the S3 transport's agents need them; ~5 ms of start-up, median of 12 imports on the 2-core VM)", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'splitzip-lazy-sdk-'));
    try {
      const { status, stdout, stderr } = runChild(`
        const cache = await store.openCacheStore(${JSON.stringify(join(dir, 'cache'))}, { create: true });
        await cache.close();
        console.log(JSON.stringify(process.moduleLoadList.filter((name) => /^NativeModule (http|https)$/.test(name))));`);
      expect(stderr).toBe('');
      expect(status).toBe(0);
      expect(JSON.parse(stdout.trim())).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an s3:// cache without a loadable SDK fails with a typed S3_ERROR', () => {
    const { status, stdout, stderr } = runChild(`
      try { await store.openCacheStore('s3://bucket/prefix'); console.log('opened'); }
      catch (error) { console.log(error.code, error.message); }`);
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(stdout).toMatch(/^S3_ERROR .*cannot load the AWS SDK for S3: .*blocked: @aws-sdk\/client-s3/);
  });
});
