// The device checksum's plan and digest finishing, without a GPU: the input buffer is laid out as
// the decoder uploads it (every window at its dstOffset), the hash pass is replayed thread by
// thread in JavaScript with the shader's own indexing (span records relative to each group's
// binding, 24 lanes a segment), and the finished digests must equal the codec's segment digests
// for the same payload. The WGSL itself runs in the browser tests (SwiftShader) and on the H200.
import {
  calibrateCodebook,
  computeSegmentDigests,
  convertPayloadVersion,
  createCodebook,
  encode,
  readEscapeStreams,
  readPayloadMeta,
  SEGMENT_VALUES,
  verifySegmentDigests,
} from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { planDeviceChecksum, type DeviceChecksumPlan } from '../src/plan-device-checksum.js';
import { planDeviceSlices, type DecodeDeviceLimits, type DecodeSegmentPlan } from '../src/plan-device-slices.js';
import { createHashShader, finishStreamDigests, HASH_THREADS_PER_SEGMENT } from '../src/wgsl-checksum-source.js';
import { escapeHeavyValues, modelLikeValues } from './fixtures.js';

const LIMITS: DecodeDeviceLimits = { maxStorageBufferBindingSize: 2 ** 27, maxBufferSize: 2 ** 28, maxComputeWorkgroupsPerDimension: 65535 };
const P1 = 2654435761;
const P2 = 2246822519;
const rotl = (x: number, r: number) => ((x << r) | (x >>> (32 - r))) >>> 0;
const round = (v: number, w: number) => Math.imul(rotl((v + Math.imul(w, P2)) >>> 0, 13), P1) >>> 0;

/** The device's input buffer: every window of the segment copied to its dstOffset. */
function layInput(payload: Uint8Array, segment: DecodeSegmentPlan): Uint8Array {
  const input = new Uint8Array(segment.inputBytes);
  for (const s of segment.slices) {
    for (const w of [s.codes, s.sm, s.escapeIndex, s.positions, s.exponents]) {
      if (w !== null) input.set(payload.subarray(w.srcOffset, w.srcOffset + w.bytes), w.dstOffset);
    }
  }
  return input;
}

/** The hash shader, thread by thread: each group sees its binding [baseBytes, endBytes) of the input as u32 words. */
function replayHashPass(input: Uint8Array, hash: DeviceChecksumPlan): Uint32Array {
  const lanes = new Uint32Array(hash.laneCount);
  for (const g of hash.groups) {
    const words = new Uint32Array(input.buffer.slice(g.baseBytes, g.endBytes));
    for (let t = 0; t < g.segments * HASH_THREADS_PER_SEGMENT; t++) {
      const s = Math.floor(t / HASH_THREADS_PER_SEGMENT);
      const r = t % HASH_THREADS_PER_SEGMENT;
      const stream = r >> 2;
      const lane = r & 3;
      const span = hash.spans.subarray(4 * (g.firstSegment + s), 4 * (g.firstSegment + s) + 4);
      let at = stream < 2 ? span[0]! + stream * 4 + lane : span[2]! + (stream - 2) * 4 + lane;
      const left = stream < 2 ? span[1]! : span[3]!;
      const step = stream < 2 ? 8 : 16;
      let v = [(P1 + P2) >>> 0, P2, 0, (0 - P1) >>> 0][lane]!;
      // Every read inside the group's binding (the shader's reads are not bounds-checked by us).
      if (left > 0 && at + (left - 1) * step >= words.length) throw new Error(`group read past its binding at segment ${g.firstSegment + s}`);
      for (let k = 0; k < left; k++, at += step) v = round(v, words[at]!);
      lanes[(g.firstSegment + s) * HASH_THREADS_PER_SEGMENT + r] = v;
    }
  }
  return lanes;
}

function deviceDigests(payload: Uint8Array, sliceElements: number, groupsOf: (segment: DecodeSegmentPlan) => Array<[number, number]>) {
  const meta = readPayloadMeta(payload);
  const plan = planDeviceSlices(meta, readEscapeStreams(payload, meta).index, LIMITS, sliceElements);
  const hash = planDeviceChecksum(meta, plan, groupsOf(plan[0]!));
  expect(hash).not.toBeNull();
  const input = layInput(payload, plan[0]!);
  const digests = new Uint32Array(6 * hash!.segmentCount);
  finishStreamDigests(replayHashPass(input, hash!), hash!.streamBytes, digests);
  return { meta, plan, hash: hash!, input, digests };
}

const perSlice = (segment: DecodeSegmentPlan): Array<[number, number]> => segment.slices.map((_, i) => [i, i + 1]);
const inPairs = (segment: DecodeSegmentPlan): Array<[number, number]> =>
  Array.from({ length: Math.ceil(segment.slices.length / 2) }, (_, k) => [2 * k, Math.min(2 * k + 2, segment.slices.length)]);
const whole = (segment: DecodeSegmentPlan): Array<[number, number]> => [[0, segment.slices.length]];

describe('device checksum plan', () => {
  const cases: Array<[string, Uint16Array, number | undefined]> = [
    ['model-like 3*2^20+777', modelLikeValues(3 * SEGMENT_VALUES + 777, 3), undefined],
    ['model-like exactly 2^21', modelLikeValues(2 * SEGMENT_VALUES, 5), undefined],
    ['one value', modelLikeValues(1, 7), undefined],
    ['odd 300,007 values', modelLikeValues(300_007, 9), undefined],
    ['escape-heavy 2^21+13, chunk 4096', escapeHeavyValues(2 * SEGMENT_VALUES + 13, 11), 4096],
  ];
  for (const [name, values, chunkSize] of cases) {
    it(`${name}: replayed lanes finish to the codec's segment digests, for any grouping of slices`, () => {
      const book = chunkSize ? createCodebook([120, 121, 122, 123]) : calibrateCodebook(values).codebook;
      const payload = encode(values, book, chunkSize ? { chunkSize } : undefined);
      for (const [sliceElements, groupsOf] of [
        [SEGMENT_VALUES, perSlice],
        [SEGMENT_VALUES, inPairs],
        [2 * SEGMENT_VALUES, whole],
        [2 ** 22, perSlice],
      ] as const) {
        const { meta, digests, hash } = deviceDigests(payload, sliceElements, groupsOf);
        expect(hash.segmentCount).toBe(Math.ceil(values.length / SEGMENT_VALUES));
        expect(digests).toEqual(computeSegmentDigests(payload, meta, 0, hash.segmentCount));
        expect(() => verifySegmentDigests(payload, meta, digests)).not.toThrow();
      }
    });
  }

  it('hashes the last segment through its zero padding: a byte changed there in the input changes a digest', () => {
    const values = modelLikeValues(SEGMENT_VALUES + 5, 13);
    const payload = encode(values, calibrateCodebook(values).codebook);
    const { meta, hash, input, plan } = deviceDigests(payload, SEGMENT_VALUES, perSlice);
    const last = plan[0]!.slices.at(-1)!;
    // Value 5 of the last slice is its last: sm bytes 5.. are padding, codes bytes 3.. too.
    for (const at of [last.sm.dstOffset + 200, last.codes.dstOffset + 100]) {
      const damaged = input.slice();
      damaged[at] = damaged[at]! ^ 1;
      const digests = new Uint32Array(6 * hash.segmentCount);
      finishStreamDigests(replayHashPass(damaged, hash), hash.streamBytes, digests);
      expect(() => verifySegmentDigests(payload, meta, digests)).toThrow(expect.objectContaining({ code: 'CHECKSUM_MISMATCH' }));
    }
  });

  it('declines payloads the device cannot hash whole: format v2, slices under a segment, several device segments, empty', () => {
    const values = modelLikeValues(4 * SEGMENT_VALUES + 1, 17);
    const payload = encode(values, calibrateCodebook(values).codebook);
    const planFor = (p: Uint8Array, sliceElements: number, limits = LIMITS) => {
      const meta = readPayloadMeta(p);
      const plan = planDeviceSlices(meta, readEscapeStreams(p, meta).index, limits, sliceElements);
      return planDeviceChecksum(meta, plan, perSlice(plan[0] ?? { slices: [] } as unknown as DecodeSegmentPlan));
    };
    expect(planFor(payload, SEGMENT_VALUES)).not.toBeNull();
    expect(planFor(convertPayloadVersion(payload, 2), SEGMENT_VALUES)).toBeNull();
    expect(planFor(payload, SEGMENT_VALUES / 2)).toBeNull();
    expect(planFor(payload, SEGMENT_VALUES, { ...LIMITS, maxBufferSize: 6 * SEGMENT_VALUES + 6 * 256 })).toBeNull();
    const empty = encode(new Uint16Array(0), createCodebook([127]));
    const meta = readPayloadMeta(empty);
    expect(planDeviceChecksum(meta, planDeviceSlices(meta, readEscapeStreams(empty, meta).index, LIMITS), [])).toBeNull();
  });

  it('builds the shader for every unroll it accepts, and refuses others', () => {
    for (const unroll of [1, 7, 16, 64]) expect(createHashShader(unroll)).toContain(`left < ${unroll}u`);
    for (const unroll of [0, 65, 1.5]) expect(() => createHashShader(unroll)).toThrow(RangeError);
  });
});
