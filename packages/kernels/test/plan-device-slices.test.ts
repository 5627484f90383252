// The native WebGPU decoder's slicing (no GPU needed): every value in exactly one slice, every
// window inside the payload and aligned, every binding, buffer and grid within the device limits,
// and slice-local arithmetic within u32 even for the largest tensor the format allows.
import {
  calibrateCodebook,
  computePayloadLayout,
  createCodebook,
  encode,
  readEscapeStreams,
  readPayloadMeta,
  type PayloadMeta,
} from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { BINDING_ALIGN, grid, planDeviceSlices, type DecodeDeviceLimits } from '../src/plan-device-slices.js';
import { escapeHeavyValues, largeModelLikeValues, modelLikeValues } from './fixtures.js';

const DEFAULT_LIMITS: DecodeDeviceLimits = {
  maxStorageBufferBindingSize: 2 ** 27,
  maxBufferSize: 2 ** 28,
  maxComputeWorkgroupsPerDimension: 65535,
};

function checkPlan(meta: PayloadMeta, payloadBytes: number, index: Uint32Array, limits: DecodeDeviceLimits, sliceElements?: number) {
  const plan = planDeviceSlices(meta, index, limits, sliceElements);
  let next = 0;
  for (const segment of plan) {
    expect(segment.firstElement).toBe(next);
    expect(segment.outBytes).toBeLessThanOrEqual(limits.maxBufferSize);
    expect(segment.inputBytes).toBeLessThanOrEqual(limits.maxBufferSize);
    let segmentValues = 0;
    let inputEnd = 0;
    for (const slice of segment.slices) {
      expect(slice.firstElement).toBe(next);
      expect(slice.firstElement % meta.chunkSize).toBe(0);
      expect(slice.count).toBeGreaterThan(0);
      expect(slice.count).toBeLessThanOrEqual(2 ** 31);
      expect(slice.outOffset).toBe(2 * (slice.firstElement - segment.firstElement));
      expect(slice.outOffset % BINDING_ALIGN).toBe(0);
      expect(slice.outBytes).toBe(Math.ceil(slice.count / 8) * 16);
      expect(slice.outBytes).toBeLessThanOrEqual(limits.maxStorageBufferBindingSize);
      const c0 = slice.firstElement / meta.chunkSize;
      expect(slice.chunks).toBe(Math.ceil(slice.count / meta.chunkSize));
      expect(slice.firstEscape).toBe(index[c0]);
      expect(slice.escapes).toBe(index[c0 + slice.chunks]! - index[c0]!);
      const windows = [slice.codes, slice.sm, slice.escapeIndex, slice.positions, slice.exponents];
      expect(windows.slice(2).every((w) => (w === null) === (slice.escapes === 0))).toBe(true);
      for (const w of windows) {
        if (!w) continue;
        expect(w.srcOffset % 4).toBe(0);
        expect(w.bytes % 4).toBe(0);
        expect(w.srcOffset + w.bytes).toBeLessThanOrEqual(payloadBytes);
        expect(w.dstOffset % BINDING_ALIGN).toBe(0);
        expect(w.dstOffset).toBeGreaterThanOrEqual(inputEnd); // windows never overlap
        inputEnd = w.dstOffset + w.bytes;
        expect(w.bytes).toBeLessThanOrEqual(limits.maxStorageBufferBindingSize);
      }
      expect(inputEnd).toBeLessThanOrEqual(segment.inputBytes);
      // What each shader reads lies inside its window.
      expect(slice.codes.srcOffset).toBe(meta.layout.codes.offsetBytes + slice.firstElement / 2);
      expect(slice.codes.bytes).toBeGreaterThanOrEqual(4 * Math.ceil(slice.count / 8));
      expect(slice.sm.srcOffset).toBe(meta.layout.sm.offsetBytes + slice.firstElement);
      expect(slice.sm.bytes).toBeGreaterThanOrEqual(8 * Math.ceil(slice.count / 8));
      if (slice.escapes > 0) {
        expect(slice.escapeIndex!.srcOffset).toBe(meta.layout.escapeIndex.offsetBytes + 4 * c0);
        expect(slice.escapeIndex!.bytes).toBe(4 * (slice.chunks + 1));
        expect(slice.positions!.srcOffset + slice.posDelta).toBe(meta.layout.escapePositions.offsetBytes + 2 * slice.firstEscape);
        expect(slice.posDelta + 2 * slice.escapes).toBeLessThanOrEqual(slice.positions!.bytes);
        expect(slice.exponents!.srcOffset + slice.expDelta).toBe(meta.layout.escapeExponents.offsetBytes + slice.firstEscape);
        expect(slice.expDelta + slice.escapes).toBeLessThanOrEqual(slice.exponents!.bytes);
      }
      for (const [groups, threads] of [
        [slice.decodeGroups, Math.ceil(slice.count / 8)],
        [slice.patchGroups, slice.escapes],
      ] as const) {
        expect(groups[0]).toBeLessThanOrEqual(limits.maxComputeWorkgroupsPerDimension);
        expect(groups[1]).toBeLessThanOrEqual(limits.maxComputeWorkgroupsPerDimension);
        expect(groups[0] * groups[1] * 256).toBeGreaterThanOrEqual(threads);
        // Every thread index the shaders compute fits a u32.
        expect(groups[0] * groups[1] * 256).toBeLessThan(2 ** 32);
      }
      next += slice.count;
      segmentValues += slice.count;
    }
    expect(segment.count).toBe(segmentValues);
  }
  expect(next).toBe(meta.elementCount);
  return plan;
}

function payloadOf(values: Uint16Array, codebook = calibrateCodebook(values).codebook, chunkSize?: number) {
  const payload = encode(values, codebook, chunkSize ? { chunkSize } : undefined);
  const meta = readPayloadMeta(payload);
  return { payload, meta, index: readEscapeStreams(payload, meta).index };
}

describe('planDeviceSlices', () => {
  const modelBook = calibrateCodebook(modelLikeValues(1 << 16)).codebook;
  const inputs = [
    ['model-like, odd, several slices', payloadOf(largeModelLikeValues(3 * 2 ** 16 + 5))],
    ['escape-heavy, chunk 64 (odd escape offsets)', payloadOf(escapeHeavyValues(50_001), modelBook, 64)],
    ['escape-heavy, chunk 65536', payloadOf(escapeHeavyValues(131_075, 9), modelBook, 65_536)],
    ['three values', payloadOf(new Uint16Array([0x3f80, 0x7f80, 1]), createCodebook([127, 0]))],
  ] as const;

  for (const [name, { payload, meta, index }] of inputs) {
    it(`${name}: default slices and limits`, () => {
      checkPlan(meta, payload.length, index, DEFAULT_LIMITS);
    });
    it(`${name}: small slices, small buffers (several segments)`, () => {
      const limits = { maxStorageBufferBindingSize: 2 ** 20, maxBufferSize: 2 ** 19, maxComputeWorkgroupsPerDimension: 16 };
      const plan = checkPlan(meta, payload.length, index, limits, 4096);
      if (meta.elementCount > 2 ** 18 && meta.chunkSize <= 4096) expect(plan.length).toBeGreaterThan(1);
    });
  }

  it('2-D grids where one dimension is too small, and slices cut to what a grid covers', () => {
    const { payload, meta, index } = inputs[1][1];
    const limits = { ...DEFAULT_LIMITS, maxComputeWorkgroupsPerDimension: 4 };
    const slices = checkPlan(meta, payload.length, index, limits).flatMap((s) => s.slices);
    expect(slices[0]!.count).toBe(4096); // 4 x 4 groups of 256 threads
    expect(slices.some((s) => s.patchGroups[1] > 1)).toBe(true);
    const big = inputs[2][1];
    expect(() => planDeviceSlices(big.meta, big.index, limits)).toThrow(/BACKEND_UNAVAILABLE/);
  });

  it('empty tensor: no segments', () => {
    const { meta, index } = payloadOf(new Uint16Array(0), createCodebook([127]));
    expect(planDeviceSlices(meta, index, DEFAULT_LIMITS)).toEqual([]);
  });

  it('slices shrink to the binding limit and grow to a whole chunk', () => {
    const { meta, index } = payloadOf(largeModelLikeValues(2 ** 20), undefined, 65_536);
    const tight = { ...DEFAULT_LIMITS, maxStorageBufferBindingSize: 2 ** 18 };
    expect(checkPlan(meta, Infinity, index, tight).flatMap((s) => s.slices)[0]!.count).toBe(2 ** 16);
    expect(checkPlan(meta, Infinity, index, DEFAULT_LIMITS, 64).flatMap((s) => s.slices)[0]!.count).toBe(2 ** 16);
  });

  it('the largest tensor the format allows (2^32 - 1 values) stays within u32 and the limits', () => {
    const n = 2 ** 32 - 1;
    const chunkSize = 65_536;
    const layout = computePayloadLayout(n, 0, chunkSize);
    const chunkCount = Math.ceil(n / chunkSize);
    const meta = { elementCount: n, chunkSize, chunkCount, escapeCount: 0, layout } as unknown as PayloadMeta;
    // An H200-like device (Dawn on Vulkan): 4 GiB bindings and buffers.
    const limits = { maxStorageBufferBindingSize: 2 ** 32 - 4, maxBufferSize: 2 ** 32, maxComputeWorkgroupsPerDimension: 65535 };
    const plan = checkPlan(meta, layout.totalBytes, new Uint32Array(chunkCount + 1), limits, 2 ** 31);
    expect(plan.length).toBeGreaterThan(1); // 8 GiB of output cannot be one buffer
  });

  it('refuses a device too small for one chunk', () => {
    const { meta, index } = payloadOf(modelLikeValues(70_000), undefined, 65_536);
    expect(() => planDeviceSlices(meta, index, { ...DEFAULT_LIMITS, maxBufferSize: 2 ** 17 })).toThrow(/BACKEND_UNAVAILABLE/);
  });

  it('grid covers the groups within the per-dimension limit', () => {
    expect(grid(0, 65535)).toEqual([0, 0]);
    expect(grid(10, 65535)).toEqual([10, 1]);
    expect(grid(70000, 65535)).toEqual([65535, 2]);
    expect(grid(7, 3)).toEqual([3, 3]);
  });
});
