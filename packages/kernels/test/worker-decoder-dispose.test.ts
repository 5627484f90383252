import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createWorkerDecoder } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);
const silentWorkerUrl = new URL('./workers/silent-worker.mjs', import.meta.url);

function sharedPayload(count: number): { values: Uint16Array; payload: Uint8Array } {
  const values = modelLikeValues(count);
  const encoded = codecEncode(values, calibrateCodebook(values).codebook);
  const payload = new Uint8Array(new SharedArrayBuffer(encoded.length));
  payload.set(encoded);
  return { values, payload };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('worker decoder dispose() with a job that cannot finish', () => {
  it('rejects a verifyChecksum whose gate is never raised, and later calls, with DISPOSED', { timeout: 15_000 }, async () => {
    const { payload } = sharedPayload(2 ** 20 + 5);
    const d = createWorkerDecoder({ threads: 1, workerUrl });
    const gate = new Int32Array(new SharedArrayBuffer(4)); // never raised: the caller's upload failed
    const verifying = d.verifyChecksum(payload, { gate });
    const later = d.decode(payload);
    const outcomes = Promise.allSettled([verifying, later]);
    await sleep(200);
    await d.dispose();
    const [first, second] = await outcomes;
    expect(first.status === 'rejected' && (first.reason as { code?: string }).code).toBe('DISPOSED');
    expect(second.status === 'rejected' && (second.reason as { code?: string }).code).toBe('DISPOSED');
  });

  it('rejects a decode whose only worker never answers (callerDecodes: false) with DISPOSED', { timeout: 15_000 }, async () => {
    const { payload } = sharedPayload(2 ** 20 + 3);
    const d = createWorkerDecoder({ threads: 1, workerUrl: silentWorkerUrl, minParallelElements: 0, callerDecodes: false });
    const decoding = d.decode(payload);
    const outcome = decoding.then(
      () => 'resolved',
      (error: { code?: string }) => error.code,
    );
    await sleep(300);
    await d.dispose();
    expect(await outcome).toBe('DISPOSED');
  });

  // A second dispose() returned at once, while the first still waited for the call and the workers.
  it('settles a second dispose() only with the first', { timeout: 15_000 }, async () => {
    const { payload } = sharedPayload(2 ** 20 + 3);
    const d = createWorkerDecoder({ threads: 1, workerUrl: silentWorkerUrl, minParallelElements: 0, callerDecodes: false });
    d.decode(payload).catch(() => undefined);
    await sleep(300);
    const order: string[] = [];
    const first = d.dispose().then(() => void order.push('first'));
    const second = d.dispose().then(() => void order.push('second'));
    await Promise.all([first, second]);
    expect(order).toEqual(['first', 'second']);
  });
});

describe('worker decoder dispose() after its worker failed to load', () => {
  // In a process of its own: the failure was the process ending while dispose() was awaited
  // (Atomics.waitAsync holds no event loop and idle workers are unreferenced), so the code after
  // it never ran and the exit code was 13 (an unsettled top-level await).
  it('settles, and the process goes on past it', { timeout: 30_000 }, () => {
    const script = `
      import { createWorkerDecoder } from ${JSON.stringify(fileURLToPath(new URL('../dist/node.js', import.meta.url)))};
      import { calibrateCodebook, encode } from '@splitzip/codec';
      const values = new Uint16Array(1 << 20).map((_, i) => ((120 + (i % 7)) << 7) | (i & 127));
      const d = createWorkerDecoder({ threads: 1, minParallelElements: 1, workerUrl: new URL(${JSON.stringify(new URL('./workers/throwing-worker.mjs', import.meta.url).href)}) });
      const out = await d.decode(encode(values, calibrateCodebook(values).codebook));
      console.log('decoded', out.every((v, i) => v === values[i]));
      await d.dispose();
      console.log('disposed');`;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8', timeout: 20_000 });
    expect(result.stdout.trim().split('\n')).toEqual(['decoded true', 'disposed']);
    expect(result.status).toBe(0);
  });
});
