import type { PayloadMeta } from '@splitzip/codec';
import { KernelsError } from './errors.js';
import { VALUES_PER_THREAD, WORKGROUP_THREADS } from './wgsl-decode-sources.js';

/** The device limits the plan must respect (GPUDevice.limits members). */
export interface DecodeDeviceLimits {
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
  maxComputeWorkgroupsPerDimension: number;
}

/** Bytes of the payload [srcOffset, srcOffset + bytes) copied to the input buffer at dstOffset. */
export interface InputWindow {
  srcOffset: number;
  dstOffset: number;
  bytes: number;
}

/** One dispatch pair (decode + escape patch) over values [firstElement, firstElement + count). */
export interface DecodeSlicePlan {
  firstElement: number;
  count: number;
  codes: InputWindow;
  sm: InputWindow;
  /** Escape index entries of the slice's chunks and the one after (null without escapes). */
  escapeIndex: InputWindow | null;
  positions: InputWindow | null;
  exponents: InputWindow | null;
  escapes: number;
  firstEscape: number;
  chunks: number;
  /** Bytes from the positions / exponents window start to the slice's first entry (0..3). */
  posDelta: number;
  expDelta: number;
  /** The slice's part of its segment's output buffer. */
  outOffset: number;
  outBytes: number;
  decodeGroups: [number, number];
  patchGroups: [number, number];
}

/** Values whose output shares one buffer (one DeviceSegment) and whose inputs fit one input buffer. */
export interface DecodeSegmentPlan {
  firstElement: number;
  count: number;
  /** Output buffer size: 2 bytes per value, rounded up to whole 16-byte thread results. */
  outBytes: number;
  /** Input buffer bytes the segment's windows use. */
  inputBytes: number;
  slices: DecodeSlicePlan[];
}

/** Storage and uniform binding offsets are aligned to this (the spec's largest allowed alignment). */
export const BINDING_ALIGN = 256;
/** Default values per slice: 4 MiB of sign/mantissa bytes, so uploads go in pieces of a few MiB. */
export const DEFAULT_SLICE_ELEMENTS = 2 ** 22;

const roundUp = (x: number, m: number): number => Math.ceil(x / m) * m;
const floorPow2 = (x: number): number => 2 ** Math.floor(Math.log2(x));

/**
 * Cuts a validated payload into slices (whole chunks, at most `sliceElements` values, a power of
 * two so every slice's output starts 256-byte aligned) and groups them into segments whose output
 * buffer and input buffer each fit maxBufferSize. Every binding stays within
 * maxStorageBufferBindingSize and every dispatch within maxComputeWorkgroupsPerDimension (2-D
 * grids). `index` is the payload's escape index, already checked (validatePayloadStructure).
 */
export function planDeviceSlices(
  meta: PayloadMeta,
  index: Uint32Array,
  limits: DecodeDeviceLimits,
  sliceElements: number = DEFAULT_SLICE_ELEMENTS,
): DecodeSegmentPlan[] {
  const n = meta.elementCount;
  const { chunkSize } = meta;
  const maxBuffer = limits.maxBufferSize;
  // The largest window is a slice's output (2 bytes per value) or its positions (2 per escape).
  const bindingCap = floorPow2(Math.max(1, (limits.maxStorageBufferBindingSize - BINDING_ALIGN) / 2));
  const bufferCap = floorPow2(Math.max(1, (maxBuffer - 6 * BINDING_ALIGN) / 6));
  // A 2-D grid of the patch pass (one thread per escape, up to one per value) must cover a slice.
  const maxGroups = limits.maxComputeWorkgroupsPerDimension;
  const gridCap = floorPow2(maxGroups * maxGroups * WORKGROUP_THREADS);
  const requested = floorPow2(Math.max(1, sliceElements));
  // At least a chunk (chunks are decoded whole) and 128 values (256-byte aligned output windows);
  // at most 2^31 so every slice-local byte offset in the shaders fits a u32.
  const slice = Math.min(2 ** 31, Math.max(chunkSize, 128, Math.min(requested, bindingCap, bufferCap, gridCap)));
  if (2 * slice > limits.maxStorageBufferBindingSize || 6 * slice + 6 * BINDING_ALIGN > maxBuffer || slice > gridCap) {
    throw new KernelsError('BACKEND_UNAVAILABLE', 'the WebGPU device limits are too small for one chunk of this payload', {
      chunkSize,
      maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
      maxBufferSize: maxBuffer,
      maxComputeWorkgroupsPerDimension: maxGroups,
    });
  }
  const { codes, sm, escapeIndex, escapePositions, escapeExponents } = meta.layout;
  const segments: DecodeSegmentPlan[] = [];
  let segment: DecodeSegmentPlan | null = null;
  for (let first = 0; first < n; first += slice) {
    const count = Math.min(slice, n - first);
    const c0 = first / chunkSize;
    const chunks = Math.ceil(count / chunkSize);
    const e0 = index[c0]!;
    const escapes = index[c0 + chunks]! - e0;
    const outBytes = roundUp(count, VALUES_PER_THREAD) * 2;
    // The codes and sm windows run on to a 256-byte boundary where the section's span has bytes
    // (its zero padding, up to the next section): the device checksum hashes whole format-v3
    // segment spans, which end there. The decode reads only the values' words.
    const codesAt = codes.offsetBytes + first / 2;
    const smAt = sm.offsetBytes + first;
    const windows: Array<{ srcOffset: number; bytes: number }> = [
      { srcOffset: codesAt, bytes: Math.max(roundUp(Math.ceil(count / 2), 4), Math.min(roundUp(Math.ceil(count / 2), BINDING_ALIGN), sm.offsetBytes - codesAt)) },
      { srcOffset: smAt, bytes: Math.max(roundUp(count, VALUES_PER_THREAD), Math.min(roundUp(count, BINDING_ALIGN), escapeIndex.offsetBytes - smAt)) },
    ];
    let posDelta = 0;
    let expDelta = 0;
    if (escapes > 0) {
      const posAt = escapePositions.offsetBytes + 2 * e0;
      const expAt = escapeExponents.offsetBytes + e0;
      posDelta = posAt & 3;
      expDelta = expAt & 3;
      windows.push(
        { srcOffset: escapeIndex.offsetBytes + 4 * c0, bytes: 4 * (chunks + 1) },
        { srcOffset: posAt - posDelta, bytes: roundUp(posDelta + 2 * escapes, 4) },
        { srcOffset: expAt - expDelta, bytes: roundUp(expDelta + escapes, 4) },
      );
    }
    const inputBytes = windows.reduce((sum, w) => sum + roundUp(w.bytes, BINDING_ALIGN), 0);
    if (!segment || segment.outBytes + outBytes > maxBuffer || segment.inputBytes + inputBytes > maxBuffer) {
      segment = { firstElement: first, count: 0, outBytes: 0, inputBytes: 0, slices: [] };
      segments.push(segment);
    }
    const placed: InputWindow[] = windows.map((w) => {
      const placedWindow = { ...w, dstOffset: segment!.inputBytes };
      segment!.inputBytes += roundUp(w.bytes, BINDING_ALIGN);
      return placedWindow;
    });
    segment.slices.push({
      firstElement: first,
      count,
      codes: placed[0]!,
      sm: placed[1]!,
      escapeIndex: placed[2] ?? null,
      positions: placed[3] ?? null,
      exponents: placed[4] ?? null,
      escapes,
      firstEscape: e0,
      chunks,
      posDelta,
      expDelta,
      outOffset: segment.outBytes,
      outBytes,
      decodeGroups: grid(Math.ceil(count / VALUES_PER_THREAD / WORKGROUP_THREADS), limits.maxComputeWorkgroupsPerDimension),
      patchGroups: grid(Math.ceil(escapes / WORKGROUP_THREADS), limits.maxComputeWorkgroupsPerDimension),
    });
    segment.count += count;
    segment.outBytes += outBytes;
  }
  return segments;
}

/** A 2-D workgroup grid covering `groups` groups (x * y >= groups, both within the limit). */
export function grid(groups: number, maxPerDimension: number): [number, number] {
  if (groups === 0) return [0, 0];
  const x = Math.min(groups, maxPerDimension);
  return [x, Math.ceil(groups / x)];
}
