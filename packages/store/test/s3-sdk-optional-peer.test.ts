// The AWS SDK is an optional peer dependency: installs for local caches no longer carry its ~22 MB,
// and an s3:// store where it is missing says what to install.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3_SDK_INSTALL_COMMAND, S3_SDK_PACKAGES } from '../src/load-s3-sdk.js';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const manifest = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as Record<string, Record<string, unknown> | undefined>;

describe('the AWS SDK as an optional peer dependency', () => {
  it('is declared as one, with the ranges the error names, and installed for the workspace only', () => {
    expect(manifest.peerDependencies).toMatchObject(S3_SDK_PACKAGES);
    for (const name of Object.keys(S3_SDK_PACKAGES)) {
      expect(manifest.peerDependenciesMeta?.[name]).toEqual({ optional: true });
      expect(manifest.dependencies?.[name]).toBeUndefined();
      expect(manifest.devDependencies?.[name]).toEqual(expect.any(String));
    }
    expect(S3_SDK_INSTALL_COMMAND).toBe('npm i "@aws-sdk/client-s3@^3.1175.0" "@smithy/node-http-handler@^4.14.2"');
  });

  describe('a build installed without it', () => {
    let parent: string;
    beforeAll(() => {
      // The package's build with its dependencies but not the SDK, as `npm i @splitzip/store` leaves it.
      parent = mkdtempSync(join(tmpdir(), 'splitzip-no-sdk-'));
      const root = join(parent, 'node_modules', '@splitzip', 'store');
      cpSync(join(packageRoot, 'dist'), join(root, 'dist'), { recursive: true });
      cpSync(join(packageRoot, 'package.json'), join(root, 'package.json'));
      for (const dependency of Object.keys(manifest.dependencies ?? {})) {
        const link = join(parent, 'node_modules', dependency);
        mkdirSync(dirname(link), { recursive: true });
        symlinkSync(realpathSync(join(packageRoot, 'node_modules', dependency)), link, 'dir');
      }
    });
    afterAll(() => rmSync(parent, { recursive: true, force: true }));

    for (const entry of ['index.js', 'index.cjs']) {
      it(`an s3:// store fails with S3_ERROR saying what to install (${entry})`, () => {
        const load = entry.endsWith('.cjs') ? 'require' : 'await import';
        const script = `const store = ${load}(${JSON.stringify(join(parent, 'node_modules', '@splitzip', 'store', 'dist', entry))});
          store.openCacheStore('s3://bucket/prefix').then(() => console.log('opened'), (error) => console.log(error.code, error.message));`;
        const result = spawnSync(process.execPath, [...(entry.endsWith('.cjs') ? [] : ['--input-type=module']), '-e', script], {
          encoding: 'utf8',
          cwd: parent,
          // Not NODE_PATH: `pnpm exec` points it at the workspace's hidden hoisted modules, the SDK among them.
          env: { ...withoutNodePath(process.env), AWS_ENDPOINT_URL: 'http://127.0.0.1:9' },
        });
        expect(result.stderr).toBe('');
        expect(result.stdout).toMatch(/^S3_ERROR .*cannot load the AWS SDK for S3: .*MODULE_NOT_FOUND.*@aws-sdk\/client-s3/);
        expect(result.stdout.trim().endsWith(`s3:// needs it installed beside @splitzip/store: ${S3_SDK_INSTALL_COMMAND} (with -g where the splitzip command was installed with -g)`)).toBe(true);
      });
    }
  });
});

function withoutNodePath(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { NODE_PATH: _ignored, ...rest } = env;
  return rest;
}
