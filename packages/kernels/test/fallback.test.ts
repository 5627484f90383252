import { calibrateCodebook, encode as codecEncode, isSplitZipError, readPayloadMeta } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createKernels, installNodeWebGpu } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';
import { firstMismatch } from './reference-decode.js';

const values = modelLikeValues(70_001);
const { codebook } = calibrateCodebook(values);
const payload = codecEncode(values, codebook);

describe('fallback to the codec path, with a reason', () => {
  it('a backend that fails to start', async () => {
    const kernels = await createKernels({ backend: 'webasm', testFaults: { failStart: true } });
    try {
      expect(kernels.backend).toBe('codec');
      expect(kernels.fallbackReason).toMatch(/webasm failed to start: .*injected fault/);
      expect(kernels.availableBackends).toEqual(['codec']);
      const result = await kernels.decode(payload);
      expect(result.backend).toBe('codec');
      expect(result.fallbackReason).toMatch(/webasm failed to start/);
      expect(firstMismatch(result.values, values)).toBe(-1);
      const encoded = await kernels.encode(values, codebook);
      expect(encoded.backend).toBe('codec');
      expect(encoded.fallbackReason).toMatch(/webasm failed to start/);
      expect(firstMismatch(encoded.payload, payload)).toBe(-1);
    } finally {
      await kernels.dispose();
    }
  });

  it('a backend whose known-answer self-check is wrong', async () => {
    const kernels = await createKernels({ backend: 'cpu', testFaults: { corruptSelfCheck: true } });
    try {
      expect(kernels.backend).toBe('codec');
      expect(kernels.fallbackReason).toMatch(/SELF_CHECK_FAILED: known-answer decode differs at value 7/);
      const result = await kernels.decodeToDevice(payload);
      expect(result.backend).toBe('codec');
      expect(result.location).toBe('host');
      expect(firstMismatch(await result.toArray(), values)).toBe(-1);
    } finally {
      await kernels.dispose();
    }
  });

  it('a backend that fails mid-call (a lost device) falls back per call and stays off', async () => {
    const kernels = await createKernels({ backend: 'webasm', testFaults: { failLaunches: true } });
    try {
      expect(kernels.backend).toBe('webasm');
      expect(kernels.fallbackReason).toBeNull();
      const first = await kernels.decode(payload);
      expect(first.backend).toBe('codec');
      expect(first.fallbackReason).toMatch(/webasm failed during decode: .*device lost/);
      expect(firstMismatch(first.values, values)).toBe(-1);
      // The instance says so too (it named webasm, with no reason, while every call ran on codec).
      expect(kernels.backend).toBe('codec');
      expect(kernels.fallbackReason).toBe(first.fallbackReason);
      expect(kernels.availableBackends).toEqual(['codec']);
      const second = await kernels.encode(values, codebook);
      expect(second.backend).toBe('codec');
      expect(second.fallbackReason).toMatch(/webasm failed during decode/);
      expect(firstMismatch(second.payload, payload)).toBe(-1);
    } finally {
      await kernels.dispose();
    }
  });

  it('webgpu here: runs where Dawn loads, else the codec with the load error as the reason', async () => {
    const status = await installNodeWebGpu();
    const kernels = await createKernels({ backend: 'webgpu' });
    try {
      const result = await kernels.decode(payload);
      expect(firstMismatch(result.values, values)).toBe(-1);
      if (status.available) {
        expect(result.backend).toBe('webgpu');
      } else {
        expect(kernels.backend).toBe('codec');
        expect(result.backend).toBe('codec');
        expect(result.fallbackReason).toContain(status.reason!);
      }
    } finally {
      await kernels.dispose();
    }
  });

  it('auto never uses a backend that failed to start', async () => {
    const kernels = await createKernels({ backend: 'auto', testFaults: { failStart: true } });
    try {
      expect(kernels.availableBackends).toEqual(['codec']);
      for (const n of [1_000, 2 ** 20, 2 ** 24]) {
        const result = await kernels.decode(codecEncode(values.subarray(0, Math.min(n, values.length)), codebook));
        expect(result.backend).toBe('codec');
      }
    } finally {
      await kernels.dispose();
    }
  });

  it('rejects an unknown backend name', async () => {
    await expect(createKernels({ backend: 'gl' as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  // A caller's bad option is no broken backend: checked on every host before any backend starts.
  // Inside webgpu's start it became a quiet fallback to the codec (or, under auto, to webgl2 with no
  // reason given), and where there is no WebGPU (Node here) it was never checked.
  it('rejects bad webgpu options, a non-boolean webasmThreads, and call options that are not objects', async () => {
    const bad = [{ upload: 'bogus' }, { readbackStagings: 99 }, { readbackPieceBytes: 100 }, { checksumOnDeviceUnroll: 0 }, { uploadPieceBytes: -1 }];
    for (const webgpu of bad) {
      for (const backend of ['webgpu', 'auto', 'cpu'] as const) {
        await expect(createKernels({ backend, webgpu: webgpu as never }), JSON.stringify({ backend, webgpu })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      }
    }
    await expect(createKernels({ backend: 'cpu', webgpu: 5 as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(createKernels({ backend: 'webasm', webasmThreads: 'yes' as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const kernels = await createKernels({ backend: 'cpu' });
    try {
      await expect(kernels.decode(payload, undefined, 5 as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(kernels.decodeToDevice(payload, 'verify' as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(kernels.encode(new Uint16Array(4), calibrateCodebook(new Uint16Array(4)).codebook, 7 as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await kernels.dispose();
    }
  });

  it('refuses calls after dispose', async () => {
    const kernels = await createKernels({ backend: 'cpu' });
    expect(kernels.disposed).toBe(false);
    await kernels.dispose();
    expect(kernels.disposed).toBe(true);
    await expect(kernels.decode(payload)).rejects.toMatchObject({ code: 'DISPOSED' });
  });
});

describe('bad payloads are rejected before any kernel launches (no fallback, no data)', () => {
  const meta = readPayloadMeta(payload);
  const corrupt = (edit: (bytes: Uint8Array) => void): Uint8Array => {
    const bytes = payload.slice();
    edit(bytes);
    return bytes;
  };
  const u32 = (bytes: Uint8Array, at: number, value: number): void => new DataView(bytes.buffer).setUint32(at, value, true);
  const bad: Array<[string, Uint8Array, string, boolean]> = [
    ['truncated', payload.subarray(0, 100), 'TRUNCATED', true],
    ['bad magic', corrupt((b) => (b[0] = 0)), 'BAD_MAGIC', true],
    ['flipped sm byte', corrupt((b) => (b[meta.layout.sm.offsetBytes + 5]! ^= 1)), 'CHECKSUM_MISMATCH', true],
    ['escape index out of order', corrupt((b) => u32(b, meta.layout.escapeIndex.offsetBytes + 8, 0xffff)), 'BAD_ESCAPE_INDEX', false],
    [
      'escape position outside its chunk',
      corrupt((b) => new DataView(b.buffer).setUint16(meta.layout.escapePositions.offsetBytes, 0xffff, true)),
      'BAD_ESCAPE_POSITION',
      false,
    ],
  ];
  for (const backend of ['cpu', 'webasm', 'codec'] as const) {
    for (const [name, bytes, code, verified] of bad) {
      it(`${backend}: ${name} -> ${code}`, async () => {
        const kernels = await createKernels({ backend });
        try {
          const options = verified ? undefined : { verify: false };
          const error = await kernels.decode(bytes, undefined, options).catch((e: unknown) => e);
          expect(isSplitZipError(error)).toBe(true);
          expect(error).toMatchObject({ code });
          const deviceError = await kernels.decodeToDevice(bytes, options).catch((e: unknown) => e);
          expect(deviceError).toMatchObject({ code });
        } finally {
          await kernels.dispose();
        }
      });
    }
  }

  it('a code past a short codebook -> INVALID_CODE (cpu)', async () => {
    const small = new Uint16Array([0x3f80, 0x3f00, 0x3f80]);
    const p = codecEncode(small, calibrateCodebook(small).codebook); // 2-entry codebook
    const m = readPayloadMeta(p);
    p[m.layout.codes.offsetBytes] = 0x0f; // value 0 gets code 15
    const kernels = await createKernels({ backend: 'cpu' });
    try {
      await expect(kernels.decode(p, undefined, { verify: false })).rejects.toMatchObject({ code: 'INVALID_CODE' });
      p[m.layout.codes.offsetBytes] = 0x10;
      p[m.layout.codes.offsetBytes + 1] = 0x10; // padding nibble after the last (odd) value
      await expect(kernels.decode(p, undefined, { verify: false })).rejects.toMatchObject({ code: 'INVALID_CODE' });
    } finally {
      await kernels.dispose();
    }
  });

  it('an output array that is too small -> OUTPUT_TOO_SMALL', async () => {
    const kernels = await createKernels({ backend: 'cpu' });
    try {
      await expect(kernels.decode(payload, new Uint16Array(10))).rejects.toMatchObject({ code: 'OUTPUT_TOO_SMALL' });
    } finally {
      await kernels.dispose();
    }
  });

  it('encode rejects what the codec rejects', async () => {
    const kernels = await createKernels({ backend: 'cpu' });
    try {
      await expect(kernels.encode(values, codebook, { chunkSize: 100 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(kernels.encode(values, { exponents: [1, 1] })).rejects.toMatchObject({ code: 'INVALID_CODEBOOK' });
    } finally {
      await kernels.dispose();
    }
  });
});
