// Workers started by a process run as `node --input-type=module -e …`, with and without
// per-process options: a worker inherits its parent's options, and --input-type made it fail.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { withoutInputType, withoutRefused } from '../src/start-worker.js';

const DIST = fileURLToPath(new URL('../dist/node.js', import.meta.url));
const START_WORKER = fileURLToPath(new URL('../dist/start-worker.js', import.meta.url));

function runHost(nodeOptions: string[], script: string): { stdout: string; status: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [...nodeOptions, '-e', script], { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8', timeout: 20_000 });
  return { stdout: result.stdout.trim(), status: result.status, stderr: result.stderr };
}

describe('withoutInputType', () => {
  it('drops --input-type in either form and nothing else; undefined when there is none (the options are then inherited untouched)', () => {
    expect(withoutInputType(['--no-warnings', '--input-type=module', '-e', 'x'])).toEqual(['--no-warnings', '-e', 'x']);
    expect(withoutInputType(['--input-type', 'module', '--conditions=dev'])).toEqual(['--conditions=dev']);
    expect(withoutInputType(['--no-warnings', '--max-old-space-size=64'])).toBeUndefined();
    expect(withoutInputType([])).toBeUndefined();
  });
});

describe('withoutRefused', () => {
  it('drops each option Node names, with its value where that is the next argument (left behind, it ended the worker\'s option parsing)', () => {
    const message = 'Initiated Worker with invalid execArgv flags: --title, --v8-pool-size=2';
    expect(withoutRefused(['--title', 'foo', '--require', './pre.cjs', '--v8-pool-size=2', '-e', 'x'], message)).toEqual(['--require', './pre.cjs', '-e', 'x']);
    // A value holding ", " is matched whole, not split.
    expect(withoutRefused(['--title=a, b', '--conditions=dev'], 'Initiated Worker with invalid execArgv flags: --title=a, b')).toEqual(['--conditions=dev']);
    expect(withoutRefused(['--conditions=dev'], 'something else')).toBeUndefined();
    expect(withoutRefused(['--conditions=dev'], 'Initiated Worker with invalid execArgv flags: --title')).toBeUndefined();
  });
});

describe('startWorker in a host started with --input-type', () => {
  // A file worker and an eval worker whose source is CommonJS (the runtime's timer thread, the
  // builder's backend probe): the first failed to start, the second ran its source as a module.
  const script = `
    import { startWorker } from ${JSON.stringify(START_WORKER)};
    const run = (worker) => new Promise((resolve) => { worker.on('message', resolve); worker.on('error', (e) => resolve('error: ' + e.message)); });
    const file = await run(startWorker(new URL('data:text/javascript,import { parentPort } from "node:worker_threads"; parentPort.postMessage("file ok")')));
    const cjs = await run(startWorker('require("node:worker_threads").parentPort.postMessage("eval ok")', { eval: true }));
    console.log(file, '|', cjs);`;
  for (const options of [['--input-type=module'], ['--input-type', 'module'], ['--max-old-space-size=256', '--expose-gc', '--input-type=module']]) {
    it(`starts file and eval workers under ${options.join(' ')} (per-process options are left out, as Node does when it passes them on)`, { timeout: 30_000 }, () => {
      const { stdout, status } = runHost(options, script);
      expect(stdout).toBe('file ok | eval ok');
      expect(status).toBe(0);
    });
  }

  it('keeps the options after a refused one that takes its value separately (a preload after --title foo was lost)', { timeout: 30_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'splitzip-start-worker-'));
    try {
      const preload = join(dir, 'pre.cjs');
      writeFileSync(preload, 'globalThis.preloaded = true;');
      const { stdout, status } = runHost(['--title', 'splitzip-test', '--require', preload, '--input-type=module'], `
        import { startWorker } from ${JSON.stringify(START_WORKER)};
        const worker = startWorker('require("node:worker_threads").parentPort.postMessage(String(globalThis.preloaded))', { eval: true });
        worker.on('message', (m) => console.log('preloaded', m));
        worker.on('error', (e) => console.log('error', e.message));`);
      expect(stdout).toBe('preloaded true');
      expect(status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('starts an eval worker whose CommonJS source would run as a module under NODE_OPTIONS=--input-type=module', { timeout: 30_000 }, () => {
    const result = spawnSync(process.execPath, ['-e', script], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      encoding: 'utf8',
      timeout: 20_000,
      env: { ...process.env, NODE_OPTIONS: '--input-type=module' },
    });
    expect(result.stdout.trim()).toBe('file ok | eval ok');
  });

  it('lets the decode workers start (callerDecodes: false: only a worker decodes)', { timeout: 30_000 }, () => {
    const { stdout, status } = runHost(['--max-old-space-size=512', '--input-type', 'module'], `
      import { createWorkerDecoder } from ${JSON.stringify(DIST)};
      import { calibrateCodebook, encode } from '@splitzip/codec';
      const values = new Uint16Array((1 << 18) + 3).map((_, i) => ((120 + (i % 7)) << 7) | (i & 127));
      const encoded = encode(values, calibrateCodebook(values).codebook);
      const payload = new Uint8Array(new SharedArrayBuffer(encoded.length));
      payload.set(encoded);
      const d = createWorkerDecoder({ threads: 1, minParallelElements: 0, callerDecodes: false });
      try { const out = await d.decode(payload); console.log('decoded', out.every((v, i) => v === values[i])); }
      catch (error) { console.log(error.code, error.message); }
      await d.dispose();`);
    expect(stdout).toBe('decoded true');
    expect(status).toBe(0);
  });
});
