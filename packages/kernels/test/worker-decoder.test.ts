import { calibrateCodebook, encode as codecEncode, isSplitZipError, readPayloadMeta } from '@splitzip/codec';
import { afterAll, describe, expect, it } from 'vitest';
import { createWorkerDecoder } from '../src/node.js';
import { escapeHeavyValues, largeModelLikeValues, modelLikeValues } from './fixtures.js';
import { firstMismatch, referenceDecode } from './reference-decode.js';

// The worker script is the built one (tests run after the build, as turbo orders them).
const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);

describe('worker-thread decoder', () => {
  // 1 worker + the calling thread (the 2-core setup), and 3 workers + the calling thread.
  const decoder = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 1 });
  const odd = createWorkerDecoder({ threads: 3, workerUrl, minParallelElements: 1 });
  afterAll(async () => {
    await decoder.dispose();
    await odd.dispose();
  });

  const values = modelLikeValues(300_007);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);

  it('is bit-exact with 1 and 3 workers, output backed by a SharedArrayBuffer', async () => {
    const expected = referenceDecode(payload);
    for (const d of [decoder, odd]) {
      const out = await d.decode(payload);
      expect(out.buffer).toBeInstanceOf(SharedArrayBuffer);
      expect(firstMismatch(out, expected)).toBe(-1);
    }
  });

  it('is bit-exact on escape-heavy data with small chunks, into a caller array', async () => {
    const heavy = escapeHeavyValues(50_001);
    const p = codecEncode(heavy, codebook, { chunkSize: 64 });
    const out = new Uint16Array(heavy.length + 1).fill(7);
    const result = await odd.decode(p, out);
    expect(result).toBe(out);
    expect(firstMismatch(out.subarray(0, heavy.length), referenceDecode(p))).toBe(-1);
    expect(out[heavy.length]).toBe(7);
  });

  it('reads a payload that sits at an odd offset inside a SharedArrayBuffer', async () => {
    const shared = new Uint8Array(new SharedArrayBuffer(payload.length + 3));
    shared.set(payload, 3);
    const out = await decoder.decode(shared.subarray(3));
    expect(firstMismatch(out, values)).toBe(-1);
  });

  it(`decodes more than 2^24 values bit-exact`, async () => {
    const big = largeModelLikeValues(2 ** 24 + 1_001);
    const book = calibrateCodebook(big).codebook;
    const p = codecEncode(big, book);
    const out = await decoder.decode(p);
    expect(firstMismatch(out, big)).toBe(-1);
  });

  it('reports a corrupt escape stream from a worker as the codec error', async () => {
    const meta = readPayloadMeta(payload);
    expect(meta.escapeCount).toBeGreaterThan(0);
    const bad = payload.slice();
    new DataView(bad.buffer).setUint16(meta.layout.escapePositions.offsetBytes, 0xffff, true);
    const error = await decoder.decode(bad, undefined, { verify: false }).catch((e: unknown) => e);
    expect(isSplitZipError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'BAD_ESCAPE_POSITION' });
    // The pool survives a failed task.
    expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1);
  });

  it('fails a corrupt payload on its checksum', async () => {
    const bad = payload.slice();
    bad[readPayloadMeta(payload).layout.sm.offsetBytes + 10]! ^= 0x40;
    await expect(decoder.decode(bad)).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH' });
    // With splitChecksum: false verified decodes run the codec's fused decode + checksum on the
    // calling thread, into a shared output too; without the checksum the workers decode the
    // flipped bit.
    const fused = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 1, splitChecksum: false });
    try {
      const out = new Uint16Array(new SharedArrayBuffer(2 * values.length));
      await expect(fused.decode(bad, out)).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH' });
      expect(firstMismatch(await fused.decode(payload, out), values)).toBe(-1);
      expect(firstMismatch(await fused.decode(payload), values)).toBe(-1);
      expect(firstMismatch(await fused.decode(bad, out, { verify: false }), values)).toBe(10);
    } finally {
      await fused.dispose();
    }
  });

  it('decodes small tensors on the calling thread, into a SharedArrayBuffer as large ones', async () => {
    const small = createWorkerDecoder({ threads: 2, workerUrl });
    try {
      const v = modelLikeValues(1_001);
      const out = await small.decode(codecEncode(v, codebook));
      // One kind of result whatever the size (an ordinary ArrayBuffer here until 2026-12-07).
      expect(out.buffer).toBeInstanceOf(SharedArrayBuffer);
      expect(firstMismatch(out, v)).toBe(-1);
    } finally {
      await small.dispose();
    }
  });

  it('runs concurrent calls one at a time, each bit-exact', async () => {
    const other = modelLikeValues(120_001, 21);
    const otherPayload = codecEncode(other, codebook, { chunkSize: 256 });
    const outs = await Promise.all([decoder.decode(payload), decoder.decode(otherPayload), decoder.decode(payload, new Uint16Array(values.length))]);
    expect(firstMismatch(outs[0]!, values)).toBe(-1);
    expect(firstMismatch(outs[1]!, other)).toBe(-1);
    expect(firstMismatch(outs[2]!, values)).toBe(-1);
  });

  it('refuses work after dispose and rejects bad thread counts', async () => {
    const d = createWorkerDecoder({ threads: 2, workerUrl, minParallelElements: 1 });
    await d.decode(payload);
    await d.dispose();
    await expect(d.decode(payload)).rejects.toMatchObject({ code: 'DISPOSED' });
    expect(() => createWorkerDecoder({ threads: 0 })).toThrow(/threads/);
  });
});

// Workers that cannot run (a wrong workerUrl, a worker that exits): with callerDecodes the calling
// thread decodes alone and every result is right, so nothing told the caller the pool was gone.
describe('a pool whose workers die', () => {
  it('still decodes bit-exact on the calling thread, and says so in workerDeaths / lastWorkerFailure', async () => {
    const values = modelLikeValues((1 << 20) + 5, 41);
    const source = codecEncode(values, calibrateCodebook(values).codebook);
    const payload = new Uint8Array(new SharedArrayBuffer(source.length));
    payload.set(source);
    const broken = createWorkerDecoder({ threads: 1, minParallelElements: 0, workerUrl: new URL('./workers/throwing-worker.mjs', import.meta.url) });
    try {
      expect(broken.workerDeaths).toBe(0);
      expect(broken.lastWorkerFailure).toBeNull();
      const decoded = await broken.decode(payload);
      expect(firstMismatch(decoded, values)).toBe(-1);
      // The death may be reported just after the call that hit it.
      for (let i = 0; i < 100 && broken.workerDeaths === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(broken.workerDeaths).toBeGreaterThan(0);
      expect(broken.lastWorkerFailure).toEqual(expect.any(String));
    } finally {
      await broken.dispose();
    }
    // A healthy pool reports none, before and after dispose.
    const healthy = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 0 });
    await healthy.decode(payload);
    await healthy.dispose();
    expect(healthy.workerDeaths).toBe(0);
  });
});
