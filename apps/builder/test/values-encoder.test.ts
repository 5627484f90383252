// `--backend auto` without the probe worker: when the kernels' rule (read from its side-effect-free
// entry) picks the codec to encode at every size, no worker starts; when a backend could win an
// encode, the probe worker asks which backends start, as before. And the workers' payload digest.
import { createHash } from 'node:crypto';
import { calibrateCodebook, encode, readPayloadMeta } from '@splitzip/codec';
import { createRandom, toBf16 } from '@splitzip/test-support/random';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type * as WorkerThreads from 'node:worker_threads';
import type * as AutoRule from '@splitzip/kernels/auto-rule';

const workerStarts = vi.hoisted(() => ({ count: 0 }));
const rule = vi.hoisted(() => ({ encodeWinner: null as string | null }));

// Every Worker this module would start is counted and fails at once (no real thread is needed to
// tell whether the probe ran).
vi.mock('node:worker_threads', async (importOriginal) => {
  const actual = await importOriginal<typeof WorkerThreads>();
  class CountingWorker extends actual.Worker {
    constructor(...args: ConstructorParameters<typeof actual.Worker>) {
      workerStarts.count++;
      super('throw new Error("probe worker started")', { eval: true });
      void args;
    }
  }
  return { ...actual, Worker: CountingWorker };
});

// The real rule, or one where `rule.encodeWinner` wins encodes of 2^20 values and more.
vi.mock('@splitzip/kernels/auto-rule', async (importOriginal) => {
  const actual = await importOriginal<typeof AutoRule>();
  return {
    ...actual,
    candidateBackends: (platform: 'node' | 'browser') => (rule.encodeWinner ? [rule.encodeWinner] : actual.candidateBackends(platform)),
    pickBackend: (platform: 'node' | 'browser', operation: 'decode' | 'encode' | 'decodeToDevice', elementCount: number, available: readonly string[]) =>
      rule.encodeWinner && operation === 'encode' && elementCount >= 2 ** 20 && available.includes(rule.encodeWinner)
        ? rule.encodeWinner
        : actual.pickBackend(platform, operation, elementCount, available as never),
  };
});

// A Kernels instance whose backend fails over to codec mid-build (`kernels.failed`), as the real
// one reports it since its backend and fallbackReason are read when asked.
const kernels = vi.hoisted(() => ({ failed: false }));
vi.mock('@splitzip/kernels/node', () => ({
  createKernels: async () => ({
    get backend() {
      return kernels.failed ? 'codec' : 'cpu';
    },
    get fallbackReason() {
      return kernels.failed ? 'cpu failed during encode: device lost' : null;
    },
    encode: async () => ({ payload: new Uint8Array(0) }),
    dispose: async () => undefined,
  }),
}));

const { codecEncoder, createValuesEncoder, ruleEncodesWithCodecOnly } = await import('../src/create-values-encoder.js');
const { calibrateAndEncode, digestPayload } = await import('../src/tensor-tasks.js');

afterEach(() => {
  workerStarts.count = 0;
  rule.encodeWinner = null;
});

describe('createValuesEncoder("auto")', () => {
  it('is the codec, with no worker started, when the measured rule encodes with the codec at every size', async () => {
    expect(await ruleEncodesWithCodecOnly()).toBe(true);
    expect(await createValuesEncoder('auto')).toBe(codecEncoder);
    expect(workerStarts.count).toBe(0);
  });

  it('asks the probe worker when another backend could win an encode', async () => {
    rule.encodeWinner = 'webgpu';
    expect(await ruleEncodesWithCodecOnly()).toBe(false);
    await expect(createValuesEncoder('auto')).rejects.toThrow(/probe worker started/);
    expect(workerStarts.count).toBe(1);
  });

  // The encoder copied them when made: a build whose backend failed mid-way reported that backend
  // with no reason, while every encode ran on codec.
  it('reports the kernels\' backend and fallback reason as they are now, not as they were at its start', async () => {
    kernels.failed = false;
    const encoder = await createValuesEncoder('cpu');
    expect([encoder.backend, encoder.fallbackReason]).toEqual(['cpu', null]);
    kernels.failed = true;
    expect([encoder.backend, encoder.fallbackReason]).toEqual(['codec', 'cpu failed during encode: device lost']);
    await encoder.dispose();
  });

  it('is the codec for `codec` without consulting anything', async () => {
    rule.encodeWinner = 'webgpu';
    expect(await createValuesEncoder('codec')).toBe(codecEncoder);
    expect(workerStarts.count).toBe(0);
  });
});

describe('calibrateAndEncode', () => {
  it("returns the payload's digest for the store: its SHA-256, checksum and length", () => {
    const random = createRandom(7);
    const values = new Uint16Array(5000).map(() => toBf16((random() - 0.5) * 0.04));
    const bytes = new Uint8Array(values.buffer);
    const out = new Uint8Array(20000).fill(0xee);
    const { payload, payloadDigest } = calibrateAndEncode(bytes, 0.99, { out, chunkSize: 256 });
    const expected = encode(values, calibrateCodebook(values).codebook, { chunkSize: 256 });
    expect(payload).toEqual(expected);
    const meta = readPayloadMeta(expected);
    expect(payloadDigest).toEqual({ sha256: createHash('sha256').update(expected).digest('hex'), checksum: meta.checksum, compBytes: expected.length });
    expect(digestPayload(out)).toEqual(payloadDigest); // the header bounds what is hashed, not the buffer
  });

  it('has no payload and no digest below the gate or without a buffer', () => {
    const random = createRandom(8);
    const noisy = new Uint8Array(4000).map(() => Math.floor(random() * 256));
    expect(calibrateAndEncode(noisy, 0.99, { out: new Uint8Array(20000), chunkSize: 256 })).toMatchObject({ payload: null, payloadDigest: null });
    const values = new Uint16Array(2000).map(() => toBf16((random() - 0.5) * 0.04));
    expect(calibrateAndEncode(new Uint8Array(values.buffer), 0.99)).toMatchObject({ payload: null, payloadDigest: null });
  });
});
