// Workers started from a file by a process run as `node --input-type=module -e …` (a worker inherits
// its parent's options, and --input-type made it fail to start).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { workerExecArgv } from '../src/worker-exec-argv.js';

const DIST = fileURLToPath(new URL('../dist/node.js', import.meta.url));

describe('workerExecArgv', () => {
  it('is the process execArgv without --input-type, in either form', () => {
    const script = `import { workerExecArgv } from ${JSON.stringify(fileURLToPath(new URL('../dist/worker-exec-argv.js', import.meta.url)))}; console.log(JSON.stringify(workerExecArgv()));`;
    for (const form of [['--input-type=module'], ['--input-type', 'module']]) {
      const result = spawnSync(process.execPath, ['--no-warnings', ...form, '-e', script], { encoding: 'utf8' });
      expect(result.stderr).toBe('');
      expect(JSON.parse(result.stdout)).toEqual(['--no-warnings', '-e', script]);
    }
    expect(workerExecArgv()).toEqual(process.execArgv.filter((arg) => !arg.startsWith('--input-type')));
  });

  it('lets the decode workers start under --input-type (callerDecodes: false: only a worker decodes)', { timeout: 30_000 }, () => {
    const script = `
      import { createWorkerDecoder } from ${JSON.stringify(DIST)};
      import { calibrateCodebook, encode } from '@splitzip/codec';
      const values = new Uint16Array((1 << 18) + 3).map((_, i) => ((120 + (i % 7)) << 7) | (i & 127));
      const encoded = encode(values, calibrateCodebook(values).codebook);
      const payload = new Uint8Array(new SharedArrayBuffer(encoded.length));
      payload.set(encoded);
      const d = createWorkerDecoder({ threads: 1, minParallelElements: 0, callerDecodes: false });
      try { const out = await d.decode(payload); console.log('decoded', out.every((v, i) => v === values[i])); }
      catch (error) { console.log(error.code, error.message); }
      await d.dispose();`;
    const result = spawnSync(process.execPath, ['--input-type', 'module', '-e', script], { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8', timeout: 20_000 });
    expect(result.stdout.trim()).toBe('decoded true');
    expect(result.status).toBe(0);
  });
});
