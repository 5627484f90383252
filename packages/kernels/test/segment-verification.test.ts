import {
  calibrateCodebook,
  computeSegmentDigests,
  convertPayloadVersion,
  createCodebook,
  createCodecArena,
  encode as codecEncode,
  isSplitZipError,
  readPayloadMeta,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  type Codebook,
} from '@splitzip/codec';
import { afterAll, describe, expect, it } from 'vitest';
import { createChecksumWorker } from '../src/create-checksum-worker.js';
import { createWebGpuDecoder } from '../src/create-webgpu-decoder.js';
import { CONTROL_DONE, createControl, decodeClaimedTasks } from '../src/decode-claimed-tasks.js';
import { isKernelsError } from '../src/errors.js';
import { createKernels, createWorkerDecoder } from '../src/node.js';
import { emptyTimings } from '../src/timings.js';
import type { GpuBufferNative, GpuDeviceNative } from '../src/webgpu-types.js';
import { escapeHeavyValues, largeModelLikeValues, modelLikeValues } from './fixtures.js';
import { codeOf, inShared } from './payload-helpers.js';
import { firstMismatch, referenceDecode } from './reference-decode.js';

// Format version 3 (payloads in checksum segments of 2^20 values) verified in parallel: the worker
// decoder decodes and hashes each segment range on whichever thread claims it and combines the
// digests before resolving; the webgpu decoder's checksum workers hash segment ranges while the
// main thread uploads. Version-2 payloads (older caches) keep the whole-payload paths.

// The worker script is the built one (tests run after the build, as turbo orders them).
const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);
const ODD_SIZE = 3 * SEGMENT_VALUES + 777;
const modelBook = calibrateCodebook(modelLikeValues(1 << 16)).codebook;

interface Case {
  name: string;
  values: Uint16Array;
  payload: Uint8Array;
}

function makeCase(name: string, values: Uint16Array, codebook?: Codebook, chunkSize?: number): Case {
  const book = codebook ?? calibrateCodebook(values).codebook;
  return { name, values, payload: codecEncode(values, book, chunkSize ? { chunkSize } : undefined) };
}

const cases: Case[] = [
  makeCase('model-like 3*2^20+777 values', largeModelLikeValues(ODD_SIZE)),
  makeCase('escape-heavy 3*2^20+777 values, chunk 4096', escapeHeavyValues(ODD_SIZE, 21), modelBook, 4096),
  makeCase('2^21+1 values (the last segment holds one value), chunk 64', largeModelLikeValues(2 * SEGMENT_VALUES + 1), undefined, 64),
  makeCase('one segment: 300,007 escape-heavy values, chunk 1024', escapeHeavyValues(300_007, 5), modelBook, 1024),
  makeCase('one segment: exactly 2^20 values', largeModelLikeValues(SEGMENT_VALUES)),
  makeCase('empty', new Uint16Array(0), createCodebook([127])),
];

/** Byte offset of an sm byte inside the last segment's span: value `at` of that segment (may be padding). */
function lastSegmentSmByte(payload: Uint8Array, at: number): number {
  const meta = readPayloadMeta(payload);
  const segments = Math.ceil(meta.elementCount / SEGMENT_VALUES);
  return meta.layout.sm.offsetBytes + (segments - 1) * SEGMENT_VALUES + at;
}

function flipped(payload: Uint8Array, at: number): Uint8Array {
  const copy = payload.slice();
  copy[at] = copy[at]! ^ 1;
  return copy;
}


const big = cases[0]!;
const bigMeta = readPayloadMeta(big.payload);
/** One sm byte of the last segment flipped (a real value's), the checksum field intact. */
const corruptLast = flipped(big.payload, lastSegmentSmByte(big.payload, 500));
/** One byte of the last segment's sm padding flipped: no decoding rule sees it, only the checksum. */
const corruptPadding = flipped(big.payload, lastSegmentSmByte(big.payload, 900));

describe('segment tasks (one thread, no workers)', () => {
  it('decode + digests per segment range equal the codec digests and the values; digests alone equal them too', () => {
    const meta = bigMeta;
    const segments = Math.ceil(meta.elementCount / SEGMENT_VALUES);
    const expected = computeSegmentDigests(big.payload, meta, 0, segments);
    for (const kind of ['segments', 'digests'] as const) {
      const digests = new Uint32Array(SEGMENT_DIGESTS * segments).fill(0xdeadbeef);
      const out = kind === 'segments' ? new Uint16Array(meta.elementCount) : null;
      const control = createControl(3);
      decodeClaimedTasks(big.payload, meta, out, control, 3, { kind, digests });
      expect(Atomics.load(control, CONTROL_DONE)).toBe(3);
      expect(Array.from(digests)).toEqual(Array.from(expected));
      if (out !== null) expect(firstMismatch(out, big.values)).toBe(-1);
    }
  });
});

describe('worker decoder: format v3 decoded and hashed per segment range on every thread', () => {
  const one = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 1 });
  const three = createWorkerDecoder({ threads: 3, workerUrl, minParallelElements: 1 });
  const inArena = createWorkerDecoder({ threads: 2, workerUrl, minParallelElements: 1, arenaBytes: 32 << 20 });
  afterAll(async () => {
    await one.dispose();
    await three.dispose();
    await inArena.dispose();
  });

  it('is bit-exact against the scalar reference, payload ordinary / shared / in the arena, out shared or ordinary', async () => {
    for (const c of cases) {
      const expected = referenceDecode(c.payload);
      expect(firstMismatch(expected, c.values), c.name).toBe(-1);
      for (const d of [one, three]) {
        // Ordinary payload: copied in range by range (segment ranges), shared result.
        expect(firstMismatch(await d.decode(c.payload), expected), `${c.name}, staged payload`).toBe(-1);
        // Shared payload, ordinary out: values copied back range by range; the rest of out untouched.
        const out = new Uint16Array(c.values.length + 2).fill(0x1234);
        await d.decode(inShared(c.payload), out);
        expect(firstMismatch(out.subarray(0, c.values.length), expected), `${c.name}, staged out`).toBe(-1);
        expect(Array.from(out.subarray(c.values.length))).toEqual([0x1234, 0x1234]);
      }
      inArena.arena!.reset();
      const slot = inArena.allocatePayload(c.payload.length);
      slot.set(c.payload);
      const values = inArena.allocateOutput(c.values.length);
      await inArena.decode(slot, values);
      expect(firstMismatch(values, expected), `${c.name}, arena`).toBe(-1);
    }
  });

  it('rejects a flipped sm byte in the LAST segment (checksum field intact) with CHECKSUM_MISMATCH, sm padding too, on every placement', async () => {
    for (const bad of [corruptLast, corruptPadding]) {
      for (const d of [one, three]) {
        expect(await codeOf(d.decode(bad))).toBe('CHECKSUM_MISMATCH');
        expect(await codeOf(d.decode(inShared(bad), new Uint16Array(ODD_SIZE)))).toBe('CHECKSUM_MISMATCH');
        expect(await codeOf(d.decode(inShared(bad)))).toBe('CHECKSUM_MISMATCH');
        // Without verify the values decode (the flipped byte is a sign/mantissa byte or padding).
        expect(await codeOf(d.decode(inShared(bad), undefined, { verify: false }))).toBe('resolved');
      }
      inArena.arena!.reset();
      const slot = inArena.allocatePayload(bad.length);
      slot.set(bad);
      expect(await codeOf(inArena.decode(slot, inArena.allocateOutput(ODD_SIZE)))).toBe('CHECKSUM_MISMATCH');
    }
    // The decoders still work after.
    expect(firstMismatch(await three.decode(big.payload), big.values)).toBe(-1);
  });

  it('reports a bad checksum before an invalid code in the last segment, and the code error without verify', async () => {
    const values = largeModelLikeValues(ODD_SIZE);
    const book = createCodebook([127, 126, 125, 124]);
    for (let i = 0; i < values.length; i++) values[i] = (values[i]! & 0x807f) | (book.exponents[i & 3]! << 7);
    const payload = codecEncode(values, book, { chunkSize: 256 });
    const meta = readPayloadMeta(payload);
    const bad = payload.slice();
    bad[meta.layout.codes.offsetBytes + (3 * SEGMENT_VALUES) / 2 + 100] = 0x77;
    for (const d of [one, three]) {
      expect(firstMismatch(await d.decode(payload), values)).toBe(-1);
      expect(await codeOf(d.decode(bad))).toBe('CHECKSUM_MISMATCH');
      expect(await codeOf(d.decode(bad, undefined, { verify: false }))).toBe('INVALID_CODE');
    }
  });

  it('still decodes and verifies format-v2 payloads (whole-payload checksum)', async () => {
    for (const c of [cases[0]!, cases[1]!, cases[5]!]) {
      const v2 = convertPayloadVersion(c.payload, 2);
      expect(readPayloadMeta(v2).version).toBe(2);
      for (const d of [one, three]) {
        expect(firstMismatch(await d.decode(v2), c.values), c.name).toBe(-1);
        expect(firstMismatch(await d.decode(inShared(v2)), c.values), c.name).toBe(-1);
      }
    }
    const v2Bad = convertPayloadVersion(big.payload, 2);
    v2Bad[lastSegmentSmByte(v2Bad, 500)]! ^= 1;
    expect(await codeOf(three.decode(v2Bad))).toBe('CHECKSUM_MISMATCH');
    expect(await codeOf(three.decode(inShared(v2Bad)))).toBe('CHECKSUM_MISMATCH');
  });
});

/** A device that records nothing and runs no shader: enough for the decoder's checksum paths. */
function createQuietDevice(): GpuDeviceNative {
  return {
    limits: { maxStorageBufferBindingSize: 2 ** 31, maxBufferSize: 2 ** 32, maxComputeWorkgroupsPerDimension: 65535 },
    queue: { writeBuffer() {}, submit() {}, onSubmittedWorkDone: () => Promise.resolve() },
    createBuffer({ size }: { size: number }): GpuBufferNative {
      const bytes = new ArrayBuffer(size);
      return {
        size,
        mapAsync: () => Promise.resolve(),
        getMappedRange: (offset = 0, length = size - offset) => bytes.slice(offset, offset + length),
        unmap() {},
        destroy() {},
      };
    },
    createShaderModule: () => ({ getCompilationInfo: () => Promise.resolve({ messages: [] }) }),
    createComputePipeline: () => ({ getBindGroupLayout: () => ({}) }),
    createBindGroup: () => ({}),
    createCommandEncoder: () => ({
      beginComputePass: () => ({ setPipeline() {}, setBindGroup() {}, dispatchWorkgroups() {}, end() {} }),
      copyBufferToBuffer() {},
      finish: () => ({}),
    }),
    pushErrorScope() {},
    popErrorScope: () => Promise.resolve(null),
  } as unknown as GpuDeviceNative;
}

describe('webgpu checksum workers: format-v3 segments hashed on K threads, combined on the calling thread', () => {
  const threeShared = createChecksumWorker({ threads: 3, workerUrl });
  afterAll(async () => {
    await threeShared.dispose();
  });

  it('any shared memory: v3 passes, a flipped sm byte in the last segment or its padding fails, v2 and empty payloads too', async () => {
    for (const c of cases) await expect(threeShared.verify(inShared(c.payload))).resolves.toBeUndefined();
    expect(await codeOf(threeShared.verify(inShared(corruptLast))!)).toBe('CHECKSUM_MISMATCH');
    expect(await codeOf(threeShared.verify(inShared(corruptPadding))!)).toBe('CHECKSUM_MISMATCH');
    // A flipped byte in the first segment, and in the escape exponents (combined on this thread).
    expect(await codeOf(threeShared.verify(inShared(flipped(big.payload, bigMeta.layout.codes.offsetBytes + 3)))!)).toBe('CHECKSUM_MISMATCH');
    expect(await codeOf(threeShared.verify(inShared(flipped(big.payload, bigMeta.layout.escapeExponents.offsetBytes)))!)).toBe('CHECKSUM_MISMATCH');
    const v2 = convertPayloadVersion(big.payload, 2);
    await expect(threeShared.verify(inShared(v2))).resolves.toBeUndefined();
    v2[lastSegmentSmByte(v2, 500)]! ^= 1;
    expect(await codeOf(threeShared.verify(inShared(v2))!)).toBe('CHECKSUM_MISMATCH');
    expect(threeShared.verify(big.payload)).toBeNull();
  });

  it('a shared arena with 3 shares: hashed in place by 3 workers; through the decoder a mismatch hands nothing out and pools the buffers', async () => {
    const arena = createCodecArena(16 << 20, { threads: 3 });
    const decoder = await createWebGpuDecoder(createQuietDevice(), { arena, checksumOnDevice: false }, createChecksumWorker({ arena, threads: 3, workerUrl }));
    try {
      const slot = arena.allocate(big.payload.length);
      slot.set(big.payload);
      decoder.release(await decoder.decodeToDevice(slot, true, emptyTimings()));
      const pooled = decoder.pooledBuffers;
      expect(pooled).toBe(1);
      slot.set(corruptLast);
      expect(await codeOf(decoder.decodeToDevice(slot, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
      expect(decoder.pooledBuffers).toBe(pooled);
      slot.set(corruptPadding);
      expect(await codeOf(decoder.decodeToDevice(slot, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
      const target = new Uint16Array(ODD_SIZE).fill(0xabcd);
      expect(await codeOf(decoder.decodeToHost(slot, target, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
      expect(target.every((v) => v === 0xabcd)).toBe(true);
      slot.set(big.payload);
      const again = await decoder.decodeToDevice(slot, true, emptyTimings());
      expect(again).toHaveLength(1);
      decoder.release(again);
    } finally {
      await decoder.dispose();
    }
  });

  it('a gate: segments are hashed only once the caller has read them; the verdict waits for the last one', async () => {
    const pool = createWorkerDecoder({ threads: 3, workerUrl });
    try {
      const segments = Math.ceil(bigMeta.elementCount / SEGMENT_VALUES);
      for (const [payload, verdict] of [
        [big.payload, 'resolved'],
        [corruptLast, 'CHECKSUM_MISMATCH'],
      ] as const) {
        const gate = new Int32Array(new SharedArrayBuffer(4));
        let settled = false;
        const result = codeOf(pool.verifyChecksum(inShared(payload), { gate })).finally(() => (settled = true));
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(settled).toBe(false);
        Atomics.store(gate, 0, segments - 1);
        Atomics.notify(gate, 0);
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(settled).toBe(false);
        Atomics.store(gate, 0, segments);
        Atomics.notify(gate, 0);
        expect(await result).toBe(verdict);
      }
      // A gate other threads cannot see is refused.
      await expect(pool.verifyChecksum(inShared(big.payload), { gate: new Int32Array(1) })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await pool.dispose();
    }
  });

  it('through the decoder, hashed behind the upload or from the start, many pieces and several device buffers: never stuck, same verdicts', async () => {
    const configs = [
      { uploadPieceBytes: 1 << 20 },
      { uploadPieceBytes: 1 << 20, sliceElements: 1 << 18, maxBufferBytes: 1 << 21 },
      { uploadPieceBytes: 1 << 20, checksumFollowsUpload: false },
    ];
    for (const [k, config] of configs.entries()) {
      const arena = createCodecArena(8 << 20, { threads: 2 });
      const decoder = await createWebGpuDecoder(createQuietDevice(), { arena, checksumOnDevice: false, ...config }, createChecksumWorker({ arena, threads: 2, workerUrl }));
      try {
        const slot = arena.allocate(big.payload.length);
        slot.set(big.payload);
        const outputs = await decoder.decodeToDevice(slot, true, emptyTimings());
        if (k === 1) expect(outputs.length).toBeGreaterThan(1);
        else expect(outputs).toHaveLength(1);
        decoder.release(outputs);
        slot.set(corruptLast);
        expect(await codeOf(decoder.decodeToDevice(slot, true, emptyTimings())), `config ${k}`).toBe('CHECKSUM_MISMATCH');
        slot.set(corruptPadding);
        expect(await codeOf(decoder.decodeToDevice(slot, true, emptyTimings())), `config ${k}`).toBe('CHECKSUM_MISMATCH');
      } finally {
        await decoder.dispose();
      }
    }
  });

  it('thread counts: the default fits a smaller arena; more threads than the arena has shares, or none, are refused', async () => {
    const small = createCodecArena(4 << 20, { threads: 1 });
    const fitted = createChecksumWorker({ arena: small, workerUrl });
    const slot = small.allocate(cases[3]!.payload.length);
    slot.set(cases[3]!.payload);
    await expect(fitted.verify(slot)).resolves.toBeUndefined();
    await fitted.dispose();
    expect(() => createChecksumWorker({ arena: small, threads: 3, workerUrl })).toThrow(/threads >= 3/);
    for (const threads of [0, 1.5, 33]) {
      try {
        createChecksumWorker({ threads, workerUrl });
        expect.unreachable(`threads ${threads} accepted`);
      } catch (error) {
        expect(isKernelsError(error) && error.code === 'INVALID_ARGUMENT').toBe(true);
      }
    }
    for (const webgpu of [{ checksumThreads: 0 }, { checksumThreads: 2, arena: small }]) {
      const code = await createKernels({ backend: 'webgpu', webgpu }).then(
        () => 'started',
        (error: unknown) => (isKernelsError(error) || isSplitZipError(error) ? error.code : String(error)),
      );
      expect(code).toBe('INVALID_ARGUMENT');
    }
  });
});
