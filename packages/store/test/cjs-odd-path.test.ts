// The CommonJS build under a path that needs escaping in a file: URL (#, %41, a space).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { copyBuildToOddPath, type OddPathCopy } from '@splitzip/test-support/odd-path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let copy: OddPathCopy;
beforeAll(() => {
  copy = copyBuildToOddPath(fileURLToPath(new URL('..', import.meta.url)));
});
afterAll(() => copy?.remove());

describe('the CommonJS build in a directory named "splitzip #1 %41-…"', () => {
  it('finds the AWS SDK beside the package (it was looked for from the path cut at "#": S3_ERROR "cannot load the AWS SDK")', () => {
    // A dead endpoint and one attempt: reaching the network at all shows the SDK loaded.
    const script = `
      const { openCacheStore } = require('./dist/index.cjs');
      openCacheStore('s3://bucket/prefix', { s3: { maxAttempts: 1 } }).then(
        () => console.log('opened'),
        (error) => console.log(error.code + ' ' + error.message.split('\\n')[0]),
      );`;
    // Without vitest's NODE_PATH, which holds the workspace's hoisted modules (the SDK among them)
    // and would find it from anywhere.
    const env: NodeJS.ProcessEnv = { ...process.env, AWS_ENDPOINT_URL: 'http://127.0.0.1:9', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y', AWS_REGION: 'us-east-1' };
    delete env.NODE_PATH;
    const result = spawnSync(process.execPath, ['-e', script], { cwd: copy.root, encoding: 'utf8', timeout: 30_000, env });
    expect(result.status).toBe(0);
    expect(result.stdout).not.toContain('cannot load the AWS SDK');
    expect(result.stdout).toMatch(/^S3_UNAVAILABLE .*ECONNREFUSED/);
  });
});
