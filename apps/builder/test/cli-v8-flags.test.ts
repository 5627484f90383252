import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLI_V8_FLAGS, HEAP_GROWING_PERCENT } from '../src/v8-heap-flags.js';
import { CLI_PATH } from './helpers/run-cli.js';

const RECORDER = fileURLToPath(new URL('./helpers/record-v8-flags.mjs', import.meta.url));

describe('the CLI sets its V8 flags', () => {
  // An s3:// model's SDK garbage grew the old space past the RSS bound (v8-heap-flags.ts): the CLI
  // process, workers included, runs with the smaller old-generation growth.
  it('sets --heap-growing-percent beside --expose-gc before running a command', () => {
    const run = spawnSync(process.execPath, ['--import', pathToFileURL(RECORDER).href, CLI_PATH, '--version'], { encoding: 'utf8' });
    expect(run.status).toBe(0);
    const line = run.stderr.split('\n').find((text) => text.startsWith('FLAGS '));
    expect(line).toBeDefined();
    const flags = JSON.parse((line as string).slice('FLAGS '.length)) as string[];
    expect(flags).toEqual([...CLI_V8_FLAGS]);
    expect(flags).toContain(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
    expect(flags).toContain('--expose-gc');
  });
});
