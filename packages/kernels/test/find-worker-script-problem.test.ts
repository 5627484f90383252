// findWorkerScriptProblem: the one rule the kernels' createWorkerDecoder and the runtime's
// createThreadDecoder check a worker script by (each throws its own typed error from the answer),
// exported on the ./worker-decoder subpath (and the Node entry) for the runtime.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { findWorkerScriptProblem } from '../src/worker-decoder-entry.js';
import * as nodeEntry from '../src/node.js';

const dir = mkdtempSync(join(tmpdir(), 'worker-script-problem-'));
const script = join(dir, 'worker.mjs');
writeFileSync(script, 'export {};\n');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('findWorkerScriptProblem', () => {
  it('a regular file, as a path or a file: URL: no problem', () => {
    expect(findWorkerScriptProblem(script)).toBeUndefined();
    expect(findWorkerScriptProblem(pathToFileURL(script))).toBeUndefined();
  });

  it('names what is wrong: no file (its errno code and path), not a file, not a local file', () => {
    expect(findWorkerScriptProblem(join(dir, 'missing.mjs'))).toEqual({ reason: 'unreadable', code: 'ENOENT', path: join(dir, 'missing.mjs') });
    expect(findWorkerScriptProblem(pathToFileURL(dir))).toEqual({ reason: 'not-a-file', path: dir });
    expect(findWorkerScriptProblem(new URL('file://otherhost/worker.mjs'))).toEqual({ reason: 'not-local', message: expect.stringContaining('File URL host') });
  });

  it('is exported by the Node entry too', () => {
    expect(nodeEntry.findWorkerScriptProblem).toBe(findWorkerScriptProblem);
  });
});
