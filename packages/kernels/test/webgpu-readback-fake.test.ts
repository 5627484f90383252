import { calibrateCodebook, encode as codecEncode, readEscapeStreams, readPayloadMeta } from '@splitzip/codec';
import { afterAll, describe, expect, it } from 'vitest';
import { createWebGpuDecoder, type WebGpuDecodeOptions, type WebGpuDecoder } from '../src/create-webgpu-decoder.js';
import { planDeviceSlices } from '../src/plan-device-slices.js';
import { createPiecedReadback, type ReadbackPart } from '../src/read-back-in-pieces.js';
import { emptyTimings } from '../src/timings.js';
import { modelLikeValues } from './fixtures.js';
import { codeOf } from './payload-helpers.js';
import { createStrictFakeDevice, patternAt, type StrictFakeBuffer, type StrictFakeDevice } from './strict-fake-device.js';

// The pieced readback (read-back-in-pieces.ts) on a strict fake device (test/strict-fake-device.ts):
// real bytes, WebGPU's mapping rules enforced, no shaders. Every value read back is checked
// against what the device buffers hold, at sizes that are not multiples of the piece, of 2, 4 or
// 8 values, one value, empty, many pieces and several parts (segments); the ring's order (the
// next pieces' copies queued before the host copies the current one), its bound, and the error
// paths (every staging unmapped, nothing pending). The browser tests check the same through the
// real decode under SwiftShader.

const SENTINEL = 0xabcd;
const MAP_READ_USAGE = 0x1 | 0x8;
/** A source buffer holding `values` as the decoder's outputs do (two per u32, size rounded up to 16 bytes). */
function sourceOf(device: StrictFakeDevice, values: Uint16Array): StrictFakeBuffer {
  const buffer = device.createBuffer({ size: Math.max(16, Math.ceil(values.length / 8) * 16), usage: 0x4 }) as StrictFakeBuffer;
  new Uint16Array(buffer.bytes.buffer, 0, values.length).set(values);
  return buffer;
}

function valuesOf(n: number, seed: number): Uint16Array {
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i++) values[i] = (Math.imul(i + seed, 2654435761) >>> 13) & 0xffff;
  return values;
}

/** No validation error, and no readback staging buffer mapped or pending (the upload's stay mapped for the next call, by design). */
function expectClean(device: StrictFakeDevice): void {
  expect(device.errors).toEqual([]);
  const busy = device.buffers.filter((b) => b.usage === MAP_READ_USAGE && (b.state === 'mapped' || b.state === 'pending'));
  expect(busy.map((b) => `${b.id} ${b.state}`)).toEqual([]);
}

describe('pieced readback: a ring of MAP_READ staging buffers', () => {
  // 64-byte pieces: 32 values each.
  const PIECE = 64;
  const sizes = [0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 63, 64, 65, 96, 100, 1000, 4097];

  for (const stagings of [1, 2, 3, 4]) {
    it(`${stagings} staging buffer(s): one part of every size bit-exact, the rest of the target untouched`, async () => {
      const device = createStrictFakeDevice();
      const readback = createPiecedReadback(device, PIECE, stagings);
      for (const n of sizes) {
        const values = valuesOf(n, n);
        const source = sourceOf(device, values);
        const target = new Uint16Array(n + 10).fill(SENTINEL);
        await readback.read([{ source, count: n, first: 3 }], target);
        expect(Array.from(target.subarray(3, 3 + n))).toEqual(Array.from(values));
        expect(target.subarray(0, 3).every((v) => v === SENTINEL)).toBe(true);
        expect(target.subarray(3 + n).every((v) => v === SENTINEL)).toBe(true);
        expectClean(device);
      }
      // The ring is kept: never more buffers than asked, none mapped between reads.
      expect(readback.stagingBuffers).toBe(stagings);
      expect(readback.mappedStagings).toBe(0);
      expect(device.maxPendingMaps).toBe(stagings);
      readback.destroy();
      expect(readback.stagingBuffers).toBe(0);
    });
  }

  it('several parts (segments) go through the ring as one stream; empty parts are skipped', async () => {
    const device = createStrictFakeDevice();
    const readback = createPiecedReadback(device, 48, 3);
    const counts = [70, 0, 1, 24, 25, 333];
    const expected = new Uint16Array(counts.reduce((a, b) => a + b, 0));
    const parts: ReadbackPart[] = [];
    let first = 0;
    for (const [k, count] of counts.entries()) {
      const values = valuesOf(count, 100 + k);
      expected.set(values, first);
      parts.push({ source: sourceOf(device, values), count, first });
      first += count;
    }
    const target = new Uint16Array(expected.length).fill(SENTINEL);
    device.events.length = 0;
    await readback.read(parts, target);
    expect(Array.from(target)).toEqual(Array.from(expected));
    expectClean(device);
    // 24-value pieces: 3 + 0 + 1 + 1 + 2 + 14 pieces, in order; the first three copies in one submit.
    const submits = device.events.filter((e) => e.startsWith('submit'));
    expect(submits).toHaveLength(1 + 21 - 3);
    expect(submits[0]!.split(' copy')).toHaveLength(4);
  });

  it("the next pieces' copies and mappings are queued before the host copies the current piece", async () => {
    const device = createStrictFakeDevice();
    const readback = createPiecedReadback(device, 64, 3);
    const values = valuesOf(32 * 10 + 5, 9);
    const source = sourceOf(device, values);
    const target = new Uint16Array(values.length);
    device.events.length = 0;
    await readback.read([{ source, count: values.length }].map((p) => ({ ...p, first: 0 })), target);
    expect(Array.from(target)).toEqual(Array.from(values));
    const [a, b, c] = device.buffers.slice(-3).map((s) => s.id);
    const ring = [a, b, c];
    // Copies of pieces 0..2 in one submit, then each host read is followed by its unmap and the
    // copy of the piece three ahead into the buffer it freed.
    expect(device.events.slice(0, 2)).toEqual([`submit copy(${source.id}->${a}) copy(${source.id}->${b}) copy(${source.id}->${c})`, `map ${a}`]);
    const readAt = device.events.flatMap((e, k) => (e.startsWith('host read') ? [k] : []));
    expect(readAt.map((k) => Number(device.events[k]!.split(' ')[2]))).toEqual(Array.from({ length: 11 }, (_, i) => ring[i % 3]));
    const copiesBefore = (k: number) => device.events.slice(0, k).join(' ').split(' copy(').length - 1;
    for (let i = 0; i < 11; i++) {
      // When piece i is copied out, the copies of pieces i + 1 and i + 2 are already queued.
      expect(copiesBefore(readAt[i]!)).toBe(Math.min(i + 3, 11));
      // After it: its unmap, then the copy of the piece three ahead into the buffer it freed.
      if (i + 3 < 11) {
        expect(device.events.slice(readAt[i]! + 1, readAt[i]! + 3)).toEqual([`unmap ${ring[i % 3]}`, `submit copy(${source.id}->${ring[i % 3]})`]);
      }
    }
    expect(device.maxPendingMaps).toBe(3);
    expectClean(device);
  });

  it('a failed mapping rejects the read only after every other mapping settled and was undone; the ring still works', async () => {
    for (const failAt of [1, 2, 4, 11]) {
      const device = createStrictFakeDevice();
      const readback = createPiecedReadback(device, 64, 3);
      const values = valuesOf(32 * 10 + 5, failAt);
      const source = sourceOf(device, values);
      device.failMapAfter(failAt);
      const target = new Uint16Array(values.length);
      await expect(readback.read([{ source, count: values.length, first: 0 }], target)).rejects.toThrow(/device lost/);
      expectClean(device);
      expect(readback.mappedStagings).toBe(0);
      await readback.read([{ source, count: values.length, first: 0 }], target);
      expect(Array.from(target)).toEqual(Array.from(values));
      expectClean(device);
    }
  });

  it('a target too small rejects (RangeError) with every staging unmapped', async () => {
    const device = createStrictFakeDevice();
    const readback = createPiecedReadback(device, 64, 2);
    const values = valuesOf(200, 1);
    await expect(readback.read([{ source: sourceOf(device, values), count: 200, first: 0 }], new Uint16Array(150))).rejects.toThrow(RangeError);
    expectClean(device);
  });

  it('piece and ring sizes out of range are refused', () => {
    const device = createStrictFakeDevice();
    for (const [piece, ring] of [[0, 2], [8, 2], [24, 2], [64.5, 2], [64, 0], [64, 9], [64, 1.5]] as const) {
      expect(() => createPiecedReadback(device, piece, ring)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });
});

describe('webgpu decoder: decode and toArray read back in pieces', () => {
  const decoders: WebGpuDecoder[] = [];
  afterAll(async () => {
    for (const d of decoders) await d.dispose();
  });
  const start = async (options: WebGpuDecodeOptions): Promise<{ device: StrictFakeDevice; decoder: WebGpuDecoder }> => {
    const device = createStrictFakeDevice();
    // The host checksum (the fake runs no shader, so the device's digests would be zero).
    const decoder = await createWebGpuDecoder(device, { checksumOnDevice: false, ...options });
    decoders.push(decoder);
    return { device, decoder };
  };
  // Chunk 64, 128-value slices (the least), 4 KiB buffers: several segments from a few hundred
  // values (where they split depends on the escapes: each slice's input windows are 256-byte aligned).
  const small = { sliceElements: 128, maxBufferBytes: 1 << 12, uploadPieceBytes: 256 };
  const segmentsOf = (payload: Uint8Array) => {
    const meta = readPayloadMeta(payload);
    const limits = { maxStorageBufferBindingSize: 2 ** 31, maxBufferSize: small.maxBufferBytes, maxComputeWorkgroupsPerDimension: 65535 };
    return planDeviceSlices(meta, readEscapeStreams(payload, meta).index, limits, small.sliceElements);
  };
  const sizes = [0, 1, 2, 3, 5, 7, 9, 63, 64, 65, 127, 511, 512, 513, 1000, 3001];
  const payloadOf = (n: number) => {
    const values = modelLikeValues(n, n + 1);
    return codecEncode(values, calibrateCodebook(values).codebook, { chunkSize: 64 });
  };

  it('decodeToHost: each segment read back from the output it was decoded into, every value in place (48-byte pieces, 2 stagings)', async () => {
    const { device, decoder } = await start({ ...small, readbackPieceBytes: 48, readbackStagings: 2 });
    let most = 0;
    for (const n of sizes) {
      const target = new Uint16Array(n).fill(SENTINEL);
      const timings = emptyTimings();
      const payload = payloadOf(n);
      await decoder.decodeToHost(payload, target, true, timings);
      // The fake runs no shader: the kept output buffer still holds its pattern, read back once per segment.
      const out = device.buffers.filter((b) => b.usage === (0x80 | 0x4) && b.state !== 'destroyed');
      expect(out).toHaveLength(n === 0 ? 0 : 1);
      const expected = new Uint16Array(n);
      const segments = segmentsOf(payload);
      most = Math.max(most, segments.length);
      for (const s of segments) for (let j = 0; j < s.count; j++) expected[s.firstElement + j] = patternAt(out[0]!.id, j);
      expect(Array.from(target)).toEqual(Array.from(expected));
      if (n > 0) expect(timings.readbackMs).toBeGreaterThan(0);
      expectClean(device);
    }
    expect(most).toBeGreaterThan(2);
  });

  it('toArray (readBack) of several segments, bit-exact, with piece sizes below, at and past a segment', async () => {
    for (const readbackPieceBytes of [16, 48, 1024, 1 << 20]) {
      const { device, decoder } = await start({ ...small, readbackPieceBytes });
      for (const n of [1, 513, 3001]) {
        const outputs = await decoder.decodeToDevice(payloadOf(n), true, emptyTimings());
        expect(outputs).toHaveLength(segmentsOf(payloadOf(n)).length);
        if (n > 1000) expect(outputs.length).toBeGreaterThan(2);
        // What the outputs hold (the fake's pattern): toArray must give exactly that, in order.
        const expected = new Uint16Array(n);
        for (const o of outputs) {
          const id = (o.buffer as StrictFakeBuffer).id;
          for (let j = 0; j < o.elementCount; j++) expected[o.firstElement + j] = patternAt(id, j);
        }
        const target = new Uint16Array(n).fill(SENTINEL);
        await decoder.readBack(outputs, target);
        expect(Array.from(target)).toEqual(Array.from(expected));
        decoder.release(outputs);
        expectClean(device);
      }
    }
  });

  it('a failed readback mapping rejects the decode with every staging unmapped; the next decode works', async () => {
    const { device, decoder } = await start({ ...small, readbackPieceBytes: 48 });
    const payload = payloadOf(1000);
    const target = new Uint16Array(1000);
    await decoder.decodeToHost(payload, target, true, emptyTimings());
    // The fourth readback mapping of the next call fails (as on a lost device).
    device.failMapAfter(4, MAP_READ_USAGE);
    expect(await codeOf(decoder.decodeToHost(payload, target, true, emptyTimings()))).not.toBe('resolved');
    expectClean(device);
    await decoder.decodeToHost(payload, target, true, emptyTimings());
    expectClean(device);
  });

  it('dispose() destroys the readback stagings', async () => {
    const { device, decoder } = await start({ ...small, readbackPieceBytes: 48, readbackStagings: 4 });
    await decoder.decodeToHost(payloadOf(3001), new Uint16Array(3001), true, emptyTimings());
    const stagings = device.buffers.filter((b) => b.usage === MAP_READ_USAGE);
    expect(stagings).toHaveLength(4);
    await decoder.dispose();
    expect(stagings.every((b) => b.state === 'destroyed')).toBe(true);
  });

  it('readbackPieceBytes and readbackStagings out of range are INVALID_ARGUMENT', async () => {
    for (const options of [{ readbackPieceBytes: 0 }, { readbackPieceBytes: 100 }, { readbackStagings: 0 }, { readbackStagings: 9 }]) {
      // Each alone: the decoder checks them before building anything.
      await expect(createWebGpuDecoder(createStrictFakeDevice(), options)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });
});
