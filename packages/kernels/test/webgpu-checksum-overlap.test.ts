import {
  calibrateCodebook,
  convertPayloadVersion,
  createCodebook,
  createCodecArena,
  encode as codecEncode,
  readPayloadMeta,
  verifyPayloadChecksum,
} from '@splitzip/codec';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChecksumOffload } from '../src/checksum-offload.js';
import { createChecksumWorker } from '../src/create-checksum-worker.js';
import { createWebGpuDecoder, type WebGpuDecodeOptions, type WebGpuDecoder } from '../src/create-webgpu-decoder.js';
import { KernelsError } from '../src/errors.js';
import { emptyTimings } from '../src/timings.js';
import type { GpuBufferNative, GpuDeviceNative } from '../src/webgpu-types.js';
import { modelLikeValues } from './fixtures.js';
import { codeOf, inShared } from './payload-helpers.js';

// The webgpu decoder's checksum overlap, without a GPU (Dawn does not load on this machine): a
// fake device that records what is submitted and copies buffers, but runs no shader, so values
// are not checked here (the browser tests check them bit-exactly under SwiftShader). What is
// checked: the work is submitted before the checksum is known, a failed checksum rejects with
// CHECKSUM_MISMATCH and its output buffers go back to the pool, FORMAT.md's error order, and the
// checksum worker (real worker threads) for shared-memory and arena payloads.

// The worker script is the built one (tests run after the build, as turbo orders them).
const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);

interface FakeDevice extends GpuDeviceNative {
  events: string[];
  bindGroupsCreated: number;
  /** Output-sized buffers created (STORAGE | COPY_SRC). */
  outputBuffersCreated: number;
  destroyed: number;
}

function createFakeDevice(): FakeDevice {
  const events: string[] = [];
  const fake = {
    events,
    bindGroupsCreated: 0,
    outputBuffersCreated: 0,
    destroyed: 0,
    limits: { maxStorageBufferBindingSize: 2 ** 31, maxBufferSize: 2 ** 32, maxComputeWorkgroupsPerDimension: 65535 },
    queue: {
      writeBuffer() {},
      submit(buffers: unknown[]) {
        for (const b of buffers) events.push(`submit ${(b as { label: string }).label}`);
      },
      onSubmittedWorkDone: () => Promise.resolve(),
    },
    createBuffer({ size, usage }: { size: number; usage: number; mappedAtCreation?: boolean }): GpuBufferNative {
      const bytes = new ArrayBuffer(size);
      if (usage === (0x80 | 0x4)) fake.outputBuffersCreated++;
      return {
        size,
        mapAsync: () => Promise.resolve(),
        getMappedRange: (offset = 0, length = size - offset) => bytes.slice(offset, offset + length),
        unmap() {},
        destroy() {
          fake.destroyed++;
        },
      };
    },
    createShaderModule: () => ({ getCompilationInfo: () => Promise.resolve({ messages: [] }) }),
    createComputePipeline: () => ({ getBindGroupLayout: () => ({}) }),
    createBindGroup() {
      fake.bindGroupsCreated++;
      return {};
    },
    createCommandEncoder() {
      const parts: string[] = [];
      const note = (part: string) => {
        if (parts[parts.length - 1] !== part) parts.push(part);
      };
      return {
        beginComputePass: () => ({
          setPipeline() {},
          setBindGroup() {},
          dispatchWorkgroups() {
            note('dispatches');
          },
          end() {},
        }),
        copyBufferToBuffer() {
          note('copy');
        },
        finish: () => ({ label: parts.join('+') || 'empty' }),
      };
    },
    pushErrorScope() {},
    popErrorScope: () => Promise.resolve(null),
  };
  return fake;
}

/** An offload that records calls and answers as the host would (or as a dead worker does). */
function recordingOffload(device: FakeDevice, answer: 'verify-here' | 'worker-died'): ChecksumOffload & { calls: number } {
  const offload = {
    calls: 0,
    verify(payload: Uint8Array) {
      if (!(payload.buffer instanceof SharedArrayBuffer)) return null;
      offload.calls++;
      device.events.push('checksum started');
      return Promise.resolve().then(() => {
        if (answer === 'worker-died') throw new KernelsError('WORKER_FAILED', 'decode worker died: exit code 1', {});
        verifyPayloadChecksum(payload);
      });
    },
    dispose: () => Promise.resolve(),
  };
  return offload;
}

const values = modelLikeValues(300_007);
const { codebook } = calibrateCodebook(values);
const good = codecEncode(values, codebook);
const layout = readPayloadMeta(good).layout;
/** One sm byte flipped, the checksum field as it was. */
const corrupted = good.slice();
flipByte(corrupted, layout.sm.offsetBytes + 12345);

function flipByte(bytes: Uint8Array, at: number): void {
  bytes[at] = bytes[at]! ^ 1;
}


describe('webgpu decoder: the checksum overlaps the upload and the kernel', () => {
  const decoders: WebGpuDecoder[] = [];
  afterAll(async () => {
    for (const d of decoders) await d.dispose();
  });
  const start = async (offload: ChecksumOffload | null, options: WebGpuDecodeOptions = {}): Promise<{ device: FakeDevice; decoder: WebGpuDecoder }> => {
    const device = createFakeDevice();
    // The host's checksum paths (the device checksum is off unless a test asks: this device runs no shader).
    const decoder = await createWebGpuDecoder(device, { checksumOnDevice: false, ...options }, offload);
    decoders.push(decoder);
    return { device, decoder };
  };

  it('an ordinary payload: the dispatches are submitted before the checksum; a mismatch rejects and pools the buffers', async () => {
    const { device, decoder } = await start(null);
    const outputs = await decoder.decodeToDevice(good, true, emptyTimings());
    expect(outputs).toHaveLength(1);
    decoder.release(outputs);
    expect(decoder.pooledBuffers).toBe(1);
    device.events.length = 0;
    expect(await codeOf(decoder.decodeToDevice(corrupted, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
    // The kernel did not wait for the checksum, and nothing was handed out.
    expect(device.events).toEqual(['submit copy+dispatches']);
    expect(decoder.pooledBuffers).toBe(1);
    const created = device.outputBuffersCreated;
    const again = await decoder.decodeToDevice(good, true, emptyTimings());
    expect(again[0]!.buffer).toBe(outputs[0]!.buffer);
    expect(device.outputBuffersCreated).toBe(created);
    decoder.release(again);
  });

  it('bind groups: reused by a later call into the same output buffer, made anew for another buffer, a grown input buffer, or reuseBindGroups: false', async () => {
    const pieced = { sliceElements: 1 << 14, uploadPieceBytes: 1 << 15 };
    const { device, decoder } = await start(null, pieced);
    const first = await decoder.decodeToDevice(good, true, emptyTimings());
    const perCall = device.bindGroupsCreated;
    expect(perCall).toBeGreaterThan(10);
    decoder.release(first);
    const again = await decoder.decodeToDevice(good, true, emptyTimings());
    expect(again[0]!.buffer).toBe(first[0]!.buffer);
    expect(device.bindGroupsCreated).toBe(perCall);
    // Kept: the next call decodes into a new buffer, with new bind groups.
    const other = await decoder.decodeToDevice(good, true, emptyTimings());
    expect(other[0]!.buffer).not.toBe(again[0]!.buffer);
    expect(device.bindGroupsCreated).toBe(2 * perCall);
    decoder.release([...again, ...other]);
    // A larger payload grows (replaces) the input buffer: groups naming the old one are not reused.
    const bigger = modelLikeValues(1_500_007); // over GROW_BYTES (1 MiB) of input
    const biggerOutputs = await decoder.decodeToDevice(codecEncode(bigger, calibrateCodebook(bigger).codebook), true, emptyTimings());
    decoder.release(biggerOutputs);
    const before = device.bindGroupsCreated;
    decoder.release(await decoder.decodeToDevice(good, true, emptyTimings()));
    expect(device.bindGroupsCreated).toBe(before + perCall);

    const fresh = await start(null, { ...pieced, reuseBindGroups: false });
    for (let call = 1; call <= 3; call++) {
      fresh.decoder.release(await fresh.decoder.decodeToDevice(good, true, emptyTimings()));
      expect(fresh.device.bindGroupsCreated).toBe(call * perCall);
    }
  });

  it('the other upload modes and drained stages: the same order, the same rejection', async () => {
    const modes: [WebGpuDecodeOptions, string[]][] = [
      [{ upload: 'mapped-staging', drainStages: true }, ['submit copy', 'submit dispatches']],
      [{ upload: 'mapped-at-creation' }, ['submit copy', 'submit dispatches']],
      [{ upload: 'write-buffer' }, ['submit dispatches']], // writeBuffer needs no command buffer
    ];
    for (const [options, events] of modes) {
      const { device, decoder } = await start(null, options);
      decoder.release(await decoder.decodeToDevice(good, true, emptyTimings()));
      device.events.length = 0;
      expect(await codeOf(decoder.decodeToDevice(corrupted, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
      expect(device.events).toEqual(events);
      expect(decoder.pooledBuffers).toBe(1);
    }
  });

  it('a corrupted payload decoded to the host never reaches the target', async () => {
    const { decoder } = await start(null);
    const target = new Uint16Array(values.length).fill(0xabcd);
    expect(await codeOf(decoder.decodeToHost(corrupted, target, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
    expect(target.every((v) => v === 0xabcd)).toBe(true);
  });

  it('several segments, several upload pieces each: every output buffer taken goes back to the pool on a mismatch', async () => {
    // 2^14-value slices in 256 KiB buffers: 300,007 values span several output buffers; 32 KiB
    // upload pieces: each piece's copy and dispatches are submitted before the next is filled.
    const { device, decoder } = await start(null, { sliceElements: 1 << 14, maxBufferBytes: 1 << 18, uploadPieceBytes: 1 << 15 });
    const outputs = await decoder.decodeToDevice(good, true, emptyTimings());
    expect(outputs.length).toBeGreaterThan(2);
    const submits = device.events.filter((e) => e === 'submit copy+dispatches').length;
    expect(submits).toBeGreaterThan(2 * outputs.length);
    expect(device.events.every((e) => e === 'submit copy+dispatches')).toBe(true);
    decoder.release(outputs);
    const pooled = decoder.pooledBuffers;
    expect(await codeOf(decoder.decodeToDevice(corrupted, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
    expect(decoder.pooledBuffers).toBe(pooled);
  });

  it('shared memory: the checksum starts before the upload; a mismatch rejects; a dead worker leaves the check to this thread', async () => {
    for (const answer of ['verify-here', 'worker-died'] as const) {
      const device = createFakeDevice();
      const offload = recordingOffload(device, answer);
      const decoder = await createWebGpuDecoder(device, { checksumOnDevice: false }, offload);
      decoders.push(decoder);
      const outputs = await decoder.decodeToDevice(inShared(good), true, emptyTimings());
      expect(device.events).toEqual(['checksum started', 'submit copy+dispatches']);
      decoder.release(outputs);
      expect(await codeOf(decoder.decodeToDevice(inShared(corrupted), true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
      expect(decoder.pooledBuffers).toBe(1);
      // Ordinary arrays and unverified calls never go to the worker.
      await decoder.decodeToDevice(good, true, emptyTimings()).then((o) => decoder.release(o));
      await decoder.decodeToDevice(inShared(good), false, emptyTimings()).then((o) => decoder.release(o));
      expect(offload.calls).toBe(2);
    }
  });

  it("errors in FORMAT.md's order on both paths", async () => {
    const small = modelLikeValues(5000, 31);
    const book = createCodebook([127, 126, 125, 124]);
    for (let i = 0; i < small.length; i++) small[i] = (small[i]! & 0x807f) | (book.exponents[i & 3]! << 7);
    const payload = codecEncode(small, book, { chunkSize: 64 });
    const smallLayout = readPayloadMeta(payload).layout;
    const badCode = payload.slice();
    badCode[smallLayout.codes.offsetBytes + 10] = 0x70;
    const badIndex = payload.slice();
    badIndex[smallLayout.escapeIndex.offsetBytes + 4] = 9;
    const truncated = payload.subarray(0, payload.length - 256);
    const offloads = [null, createChecksumWorker({ workerUrl })];
    for (const offload of offloads) {
      const { decoder } = await start(offload);
      const place = offload === null ? (p: Uint8Array) => p : inShared;
      const run = (p: Uint8Array, verify = true) => codeOf(decoder.decodeToDevice(place(p), verify, emptyTimings()));
      expect(await run(badCode)).toBe('CHECKSUM_MISMATCH');
      expect(await run(badCode, false)).toBe('INVALID_CODE');
      expect(await run(badIndex)).toBe('CHECKSUM_MISMATCH');
      expect(await run(badIndex, false)).toBe('BAD_ESCAPE_INDEX');
      expect(await run(truncated)).toBe('TRUNCATED');
      expect(await run(payload)).toBe('resolved');
    }
  });

  it('checksumOnDevice: the digests come from the device, for the payloads it can hash whole; the host checks the others', async () => {
    // The fake device runs no shader, so its lane accumulators stay zero: a good v3 payload fails
    // with CHECKSUM_MISMATCH exactly when the device's digests were used (the WGSL is checked
    // bit-exactly in the browser tests). Nothing is handed out; the outputs go back to the pool.
    const offload = recordingOffload(createFakeDevice(), 'verify-here');
    const { device, decoder } = await start(offload, { checksumOnDevice: true });
    device.events.length = 0;
    expect(await codeOf(decoder.decodeToDevice(good, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
    // One piece: its copy, decode and hash pass in one command buffer, then the lanes' readback.
    expect(device.events).toEqual(['submit copy+dispatches', 'submit copy']);
    expect(decoder.pooledBuffers).toBe(1);
    // Again: the pooled output, its decode bind groups and the hash pass's bind group are reused.
    const groups = device.bindGroupsCreated;
    expect(await codeOf(decoder.decodeToDevice(good, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
    expect(device.bindGroupsCreated).toBe(groups);
    // In shared memory too: the device hashes, no checksum worker is asked.
    expect(await codeOf(decoder.decodeToDevice(inShared(good), true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
    expect(offload.calls).toBe(0);
    // Not verified: nothing to hash. Format v2, or slices under a checksum segment: the host checks.
    expect(await codeOf(decoder.decodeToDevice(good, false, emptyTimings()).then((o) => decoder.release(o)))).toBe('resolved');
    expect(await codeOf(decoder.decodeToDevice(convertPayloadVersion(good, 2), true, emptyTimings()).then((o) => decoder.release(o)))).toBe('resolved');
    const three = codecEncode(modelLikeValues(3 * 2 ** 20 + 5, 3), codebook);
    const small = await start(null, { checksumOnDevice: true, sliceElements: 2 ** 19 });
    expect(await codeOf(small.decoder.decodeToDevice(three, true, emptyTimings()).then((o) => small.decoder.release(o)))).toBe('resolved');
    // Several pieces: a hash pass with each.
    const pieced = await start(null, { checksumOnDevice: true, sliceElements: 2 ** 20, uploadPieceBytes: 2 ** 20 });
    pieced.device.events.length = 0;
    expect(await codeOf(pieced.decoder.decodeToDevice(three, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
    expect(pieced.device.events).toEqual(['submit copy+dispatches', 'submit copy+dispatches', 'submit copy+dispatches', 'submit copy+dispatches', 'submit copy']);
  });

  it('checksumOnDeviceUnroll outside 1..64 is refused', async () => {
    for (const unroll of [0, 65, 2.5]) {
      await expect(createWebGpuDecoder(createFakeDevice(), { checksumOnDevice: true, checksumOnDeviceUnroll: unroll })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });
});

describe('the checksum worker (Node)', () => {
  const arena = createCodecArena(8 << 20, { threads: 1 });
  const inArena = createChecksumWorker({ arena, workerUrl });
  const anyShared = createChecksumWorker({ workerUrl });
  afterAll(async () => {
    await inArena.dispose();
    await anyShared.dispose();
  });

  it('checks payloads in a shared arena in place and in other shared memory; ordinary arrays stay here', async () => {
    arena.reset();
    const slot = arena.allocate(good.length);
    slot.set(good);
    await expect(inArena.verify(slot)).resolves.toBeUndefined();
    flipByte(slot, layout.sm.offsetBytes + 12345);
    expect(await codeOf(inArena.verify(slot)!)).toBe('CHECKSUM_MISMATCH');
    await expect(anyShared.verify(inShared(good))).resolves.toBeUndefined();
    expect(await codeOf(anyShared.verify(inShared(corrupted))!)).toBe('CHECKSUM_MISMATCH');
    expect(anyShared.verify(good)).toBeNull();
  });

  it('a payload in the arena through the decoder: checked on the worker, buffers pooled on a mismatch', async () => {
    // Its own arena: a share is attached by one thread only.
    const own = createCodecArena(8 << 20, { threads: 1 });
    const decoder = await createWebGpuDecoder(createFakeDevice(), { arena: own, checksumOnDevice: false }, createChecksumWorker({ arena: own, workerUrl }));
    try {
      const slot = own.allocate(good.length);
      slot.set(good);
      decoder.release(await decoder.decodeToDevice(slot, true, emptyTimings()));
      flipByte(slot, layout.sm.offsetBytes + 7);
      expect(await codeOf(decoder.decodeToDevice(slot, true, emptyTimings()))).toBe('CHECKSUM_MISMATCH');
      expect(decoder.pooledBuffers).toBe(1);
    } finally {
      await decoder.dispose();
    }
  });

  it('a private arena is refused', () => {
    expect(() => createChecksumWorker({ arena: createCodecArena(1 << 20) })).toThrow(/shared arena/);
  });
});
