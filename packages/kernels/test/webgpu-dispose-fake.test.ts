// The native webgpu decoder on the strict fake device (test/strict-fake-device.ts) when dispose()
// meets a call in flight, and a readback the device rejects: README's contract ("dispose() lets
// the launch in progress finish; a call caught by it rejects with DISPOSED") and typed errors
// only. The browser suite checks the same on real WebGPU (runProbeChecks).
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createWebGpuDecoder } from '../src/create-webgpu-decoder.js';
import { emptyTimings } from '../src/timings.js';
import { createWebGpuBackendImpl } from '../src/webgpu-backend-impl.js';
import { modelLikeValues } from './fixtures.js';
import { createStrictFakeDevice, patternAt, type StrictFakeBuffer, unusedEncoder } from './strict-fake-device.js';

const MAP_READ_USAGE = 0x1 | 0x8;
// Many upload pieces and 48-byte readback pieces: a call is a long chain of submits and map round trips.
const small = { sliceElements: 128, maxBufferBytes: 1 << 12, uploadPieceBytes: 256, readbackPieceBytes: 48, checksumOnDevice: false };
const payloadOf = (n: number): Uint8Array => {
  const v = modelLikeValues(n, n + 1);
  return codecEncode(v, calibrateCodebook(v).codebook, { chunkSize: 64 });
};
const macrotask = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));
const outcomeOf = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => 'resolved',
    (error: unknown) => error,
  );

describe('webgpu native decoder (strict fake device): dispose() during a call', () => {
  it('the decode in progress finishes on live buffers (same values, no destroyed buffer used), the queued one is DISPOSED, then every buffer is destroyed', async () => {
    const device = createStrictFakeDevice();
    const decoder = await createWebGpuDecoder(device, small);
    const payload = payloadOf(3001);
    // The fake runs no shader: the kept output's pattern is what every decode of this payload reads back.
    const reference = new Uint16Array(3001);
    await decoder.decodeToHost(payload, reference, true, emptyTimings());
    const target = new Uint16Array(3001);
    const inFlight = decoder.decodeToHost(payload, target, true, emptyTimings());
    const queued = outcomeOf(decoder.decodeToHost(payload, new Uint16Array(3001), true, emptyTimings()));
    await macrotask(); // the first call is past its start: submitting and mapping
    const disposing = decoder.dispose();
    await inFlight;
    expect(Array.from(target)).toEqual(Array.from(reference));
    expect(await queued).toMatchObject({ name: 'KernelsError', code: 'DISPOSED' });
    await disposing;
    expect(device.errors).toEqual([]);
    expect(device.buffers.filter((b) => b.state !== 'destroyed').map((b) => b.id)).toEqual([]);
    await expect(decoder.decodeToHost(payload, target, true, emptyTimings())).rejects.toMatchObject({ name: 'KernelsError', code: 'DISPOSED' });
  });

  it('a toArray in progress finishes with the result\'s values; one after dispose is DISPOSED', async () => {
    const device = createStrictFakeDevice();
    const impl = createWebGpuBackendImpl(await createWebGpuDecoder(device, small), unusedEncoder);
    const result = await impl.decodeToDevice(payloadOf(3001), undefined);
    const expected = new Uint16Array(3001);
    for (const s of result.segments) {
      const id = (s.handle as StrictFakeBuffer).id;
      for (let j = 0; j < s.elementCount; j++) expected[s.firstElement + j] = patternAt(id, j);
    }
    const reading = result.toArray();
    await macrotask();
    const disposing = impl.dispose();
    expect(Array.from(await reading)).toEqual(Array.from(expected));
    await disposing;
    expect(device.errors).toEqual([]);
    await expect(result.toArray()).rejects.toMatchObject({ name: 'KernelsError', code: 'DISPOSED' });
  });
});

describe('webgpu native decoder (strict fake device): toArray when the device rejects the readback', () => {
  it('a mapping rejected as by a lost device is KERNEL_FAILED with the device error as its cause, not the bare error', async () => {
    const device = createStrictFakeDevice();
    const impl = createWebGpuBackendImpl(await createWebGpuDecoder(device, small), unusedEncoder);
    try {
      const result = await impl.decodeToDevice(payloadOf(3001), undefined);
      device.failMapAfter(2, MAP_READ_USAGE);
      const error = await outcomeOf(result.toArray());
      expect(error).toMatchObject({ name: 'KernelsError', code: 'KERNEL_FAILED' });
      expect(String((error as Error).cause)).toMatch(/device lost/);
      // The ring is left clean: the next read works.
      expect((await result.toArray()).length).toBe(3001);
      result.delete();
    } finally {
      await impl.dispose();
    }
  });
});
