// createThreadDecoder's workerUrl and the kernels' createWorkerPoolDecoder's are checked by one rule
// (the kernels' findWorkerScriptProblem), each in its own words and error class: these messages
// are the ones both gave when each had its own copy of the rule.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { createWorkerPoolDecoder } from '../src/create-kernels-decoder.js';

const dir = mkdtempSync(join(tmpdir(), 'worker-url-rule-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function errorOf(run: () => unknown): { name?: unknown; code?: unknown; message: string; details: Record<string, unknown> } {
  try {
    run();
  } catch (error) {
    return error as never;
  }
  throw new Error('not refused');
}

const missing = new URL('file:///nonexistent/splitzip-worker.js');
const remote = new URL('file://otherhost/splitzip-worker.js');
const what = "the worker script's file: URL, new URL(import.meta.resolve('@splitzip/runtime/decode-thread'))";

describe('one workerUrl rule, two callers', () => {
  it('createThreadDecoder: RuntimeError INVALID_ARGUMENT, its words, details.path where there is one', () => {
    expect(errorOf(() => createThreadDecoder({ workerUrl: missing }))).toMatchObject({
      name: 'RuntimeError',
      code: 'INVALID_ARGUMENT',
      message: `workerUrl must be ${what}, got string "${missing.href}" (it names no file that can be read: ENOENT /nonexistent/splitzip-worker.js)`,
      details: { option: 'workerUrl', workerUrl: missing.href, path: '/nonexistent/splitzip-worker.js' },
    });
    expect(errorOf(() => createThreadDecoder({ workerUrl: pathToFileURL(dir) }))).toMatchObject({
      message: `workerUrl must be ${what}, got string "${pathToFileURL(dir).href}" (it names something that is not a file: ${dir})`,
      details: { path: dir },
    });
    const notLocal = errorOf(() => createThreadDecoder({ workerUrl: remote }));
    expect(notLocal.message).toMatch(/^workerUrl must be .*, got string "file:\/\/otherhost\/splitzip-worker\.js" \(it names no local file: File URL host must be "localhost" or empty on linux\)$/);
    expect(notLocal.details.path).toBeUndefined();
  });

  it("createWorkerPoolDecoder (the kernels' check): KernelsError INVALID_ARGUMENT, its words", () => {
    expect(errorOf(() => createWorkerPoolDecoder({ workerUrl: missing }))).toMatchObject({
      name: 'KernelsError',
      code: 'INVALID_ARGUMENT',
      message: `INVALID_ARGUMENT: workerUrl names no file that can be read (ENOENT: /nonexistent/splitzip-worker.js), got string "${missing.href}"`,
      details: { argument: 'workerUrl' },
    });
    expect(errorOf(() => createWorkerPoolDecoder({ workerUrl: pathToFileURL(dir) })).message).toBe(`INVALID_ARGUMENT: workerUrl names something that is not a file (${dir}), got string "${pathToFileURL(dir).href}"`);
    expect(errorOf(() => createWorkerPoolDecoder({ workerUrl: remote })).message).toBe(
      'INVALID_ARGUMENT: workerUrl names no local file (File URL host must be "localhost" or empty on linux), got string "file://otherhost/splitzip-worker.js"',
    );
  });
});
