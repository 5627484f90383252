// The native webgpu decoder on the strict fake device (test/strict-fake-device.ts) when the caller
// transfers its arrays mid-call: a typed error for the caller, and the backend keeps working.
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createWebGpuDecoder } from '../src/create-webgpu-decoder.js';
import { emptyTimings } from '../src/timings.js';
import { createWebGpuBackendImpl } from '../src/webgpu-backend-impl.js';
import { modelLikeValues } from './fixtures.js';
import { codeOf } from './payload-helpers.js';
import { createStrictFakeDevice, unusedEncoder } from './strict-fake-device.js';

function transfer(buffer: ArrayBufferLike): void {
  structuredClone(buffer, { transfer: [buffer as ArrayBuffer] });
}

describe('webgpu native decoder (strict fake device): caller arrays transferred mid-call', () => {
  const small = { sliceElements: 128, maxBufferBytes: 1 << 12, uploadPieceBytes: 256, checksumOnDevice: false, upload: 'mapped-staging' as const };
  const payloadOf = (n: number): Uint8Array => {
    const v = modelLikeValues(n, n + 1);
    return codecEncode(v, calibrateCodebook(v).codebook, { chunkSize: 64 });
  };

  it('a payload transferred mid-decode leaves no staging mapped: the next decode works', async () => {
    const device = createStrictFakeDevice();
    const decoder = await createWebGpuDecoder(device, small);
    try {
      await decoder.decodeToHost(payloadOf(3001), new Uint16Array(3001), true, emptyTimings());
      const doomed = payloadOf(3001);
      // Transferred once the first upload piece is submitted: the next piece's staging fill finds it detached.
      const submit = device.queue.submit.bind(device.queue);
      device.queue.submit = (commands) => {
        submit(commands);
        if (doomed.length > 0) transfer(doomed.buffer);
      };
      const pending = decoder.decodeToHost(doomed, new Uint16Array(3001), true, emptyTimings());
      expect(await codeOf(pending)).not.toBe('resolved');
      expect(doomed.length).toBe(0);
      device.queue.submit = submit;
      await decoder.decodeToHost(payloadOf(3001), new Uint16Array(3001), true, emptyTimings());
      expect(device.errors).toEqual([]);
    } finally {
      await decoder.dispose();
    }
  });

  it('toArray(out) with out transferred mid-read is OUTPUT_TOO_SMALL (as on the GL path), not a TypeError', async () => {
    const device = createStrictFakeDevice();
    const decoder = await createWebGpuDecoder(device, { ...small, readbackPieceBytes: 48 });
    const impl = createWebGpuBackendImpl(decoder, unusedEncoder);
    try {
      const result = await impl.decodeToDevice(payloadOf(3001), undefined);
      const out = new Uint16Array(3001);
      const pending = result.toArray(out);
      transfer(out.buffer);
      await expect(pending).rejects.toMatchObject({ name: 'SplitZipError', code: 'OUTPUT_TOO_SMALL' });
      result.delete();
    } finally {
      await impl.dispose();
    }
  });
});
