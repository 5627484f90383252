// collectGarbage turns V8's expose-gc flag on for a moment, and the flag is the process's: it must
// leave a flag the process turned on itself (after the worker started) as it was.
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Worker } from 'node:worker_threads';
import { expect, it } from 'vitest';

const built = fileURLToPath(new URL('../dist/collect-garbage.js', import.meta.url));

it("leaves the process's own expose-gc setting on", async () => {
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     parentPort.once('message', () => import(${JSON.stringify(built)}).then((m) => { m.collectGarbage(); parentPort.postMessage(typeof gc); }));
     parentPort.postMessage('ready');`,
    { eval: true },
  );
  try {
    const replies: unknown[] = [];
    const next = () =>
      new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
    replies.push(await next());
    setFlagsFromString('--expose-gc'); // after the worker started: its global has no gc
    const collected = next();
    worker.postMessage('go');
    replies.push(await collected);
    expect(replies).toEqual(['ready', 'undefined']);
    expect(typeof runInNewContext('gc')).toBe('function');
  } finally {
    setFlagsFromString('--no-expose-gc');
    await worker.terminate();
  }
});
