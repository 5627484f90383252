// The user probe (item 2): results typed Uint16Array / Uint8Array (ArrayBufferLike) where the
// buffer is an ordinary ArrayBuffer did not compile where lib dom wants one (TS 5.9 strict):
// crypto.subtle.digest(…, values) TS2345, new Blob([payload]) TS2322, new Response(payload)
// TS2345. The types now say which buffer each result has. This file is type-checked (`typecheck`
// covers test/): the calls below failed to compile before; the runtime checks hold the types to
// the buffers the calls really return.
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { afterAll, describe, expect, expectTypeOf, it } from 'vitest';
import { createKernels, createWorkerDecoder, type DecodeResult, type EncodeResult } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);
const values = modelLikeValues(5000);
const { codebook } = calibrateCodebook(values);
const payload = codecEncode(values, codebook);

describe('result types name their buffers', () => {
  const decoder = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 1 });
  afterAll(() => decoder.dispose());

  for (const backend of ['codec', 'cpu'] as const) {
    it(`Kernels (${backend}): decode and encode results over ordinary ArrayBuffers go to digest, Blob and Response as they are`, async () => {
      const kernels = await createKernels({ backend });
      try {
        const decoded = await kernels.decode(payload);
        expectTypeOf(decoded).toEqualTypeOf<DecodeResult<ArrayBuffer>>();
        expectTypeOf(decoded.values).toEqualTypeOf<Uint16Array<ArrayBuffer>>();
        expect(decoded.values.buffer).toBeInstanceOf(ArrayBuffer);
        expect((await crypto.subtle.digest('SHA-256', decoded.values)).byteLength).toBe(32);

        const encoded = await kernels.encode(values, codebook);
        expectTypeOf(encoded).toEqualTypeOf<EncodeResult>();
        expectTypeOf(encoded.payload).toEqualTypeOf<Uint8Array<ArrayBuffer>>();
        expect(encoded.payload.buffer).toBeInstanceOf(ArrayBuffer);
        expect(new Blob([encoded.payload]).size).toBe(encoded.payload.length);
        expect((await new Response(encoded.payload).arrayBuffer()).byteLength).toBe(encoded.payload.length);

        // With `out`, its own buffer kind: `out` itself.
        const sharedOut = new Uint16Array(new SharedArrayBuffer(2 * values.length));
        const into = await kernels.decode(payload, sharedOut);
        expectTypeOf(into.values).toEqualTypeOf<Uint16Array<SharedArrayBuffer>>();
        expect(into.values).toBe(sharedOut);

        const device = await kernels.decodeToDevice(payload);
        const readBack = await device.toArray();
        expectTypeOf(readBack).toEqualTypeOf<Uint16Array<ArrayBuffer>>();
        expect(readBack.buffer).toBeInstanceOf(ArrayBuffer);
        expectTypeOf(await device.toArray(sharedOut)).toEqualTypeOf<Uint16Array<SharedArrayBuffer>>();
        // A type argument cannot name another buffer than the one returned (a defaulted type
        // parameter let these compile, typed over a SharedArrayBuffer, the arrays ordinary).
        // @ts-expect-error toArray() without `out` is over an ArrayBuffer
        void device.toArray<SharedArrayBuffer>();
        // @ts-expect-error decode() without `out` is over an ArrayBuffer
        void kernels.decode<SharedArrayBuffer>(payload);
        // `out` that may be undefined: either buffer.
        const maybeOut = sharedOut as Uint16Array<SharedArrayBuffer> | undefined;
        expectTypeOf((await kernels.decode(payload, maybeOut)).values).toEqualTypeOf<Uint16Array<SharedArrayBuffer | ArrayBuffer>>();
        expectTypeOf(await device.toArray(maybeOut)).toEqualTypeOf<Uint16Array<SharedArrayBuffer | ArrayBuffer>>();
        device.delete();
      } finally {
        await kernels.dispose();
      }
    });
  }

  it('worker decoder: without `out` a SharedArrayBuffer, with `out` its buffer', async () => {
    const fresh = await decoder.decode(payload);
    expectTypeOf(fresh).toEqualTypeOf<Uint16Array<SharedArrayBuffer>>();
    expect(fresh.buffer).toBeInstanceOf(SharedArrayBuffer);
    const ordinary = new Uint16Array(values.length);
    const into = await decoder.decode(payload, ordinary);
    expectTypeOf(into).toEqualTypeOf<Uint16Array<ArrayBuffer>>();
    expect(into).toBe(ordinary);
    expect((await crypto.subtle.digest('SHA-256', into)).byteLength).toBe(32);
    // A type argument cannot name another buffer than the one returned: this compiled, typed
    // Uint16Array<ArrayBuffer>, over a SharedArrayBuffer.
    // @ts-expect-error decode() without `out` is over a SharedArrayBuffer
    const misnamed = await decoder.decode<ArrayBuffer>(payload);
    expect(misnamed.buffer).toBeInstanceOf(SharedArrayBuffer);
    const maybeOut = ordinary as Uint16Array<ArrayBuffer> | undefined;
    expectTypeOf(await decoder.decode(payload, maybeOut)).toEqualTypeOf<Uint16Array<ArrayBuffer | SharedArrayBuffer>>();
  });

  it('worker decoder arena views: SharedArrayBuffer, and a decode into one says so', async () => {
    const inArena = createWorkerDecoder({ threads: 1, workerUrl, arenaBytes: 1 << 20 });
    try {
      const p = inArena.allocatePayload(payload.length);
      p.set(payload);
      const out = inArena.allocateOutput(values.length);
      expectTypeOf(p).toEqualTypeOf<Uint8Array<SharedArrayBuffer>>();
      expectTypeOf(out).toEqualTypeOf<Uint16Array<SharedArrayBuffer>>();
      expect(p.buffer).toBeInstanceOf(SharedArrayBuffer);
      expect(out.buffer).toBeInstanceOf(SharedArrayBuffer);
      const decoded = await inArena.decode(p, out);
      expectTypeOf(decoded).toEqualTypeOf<Uint16Array<SharedArrayBuffer>>();
      expect(decoded).toBe(out);
    } finally {
      await inArena.dispose();
    }
  });
});
