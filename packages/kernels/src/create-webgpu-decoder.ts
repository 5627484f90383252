import {
  isSplitZipError,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  readEscapeStreams,
  readPayloadMeta,
  validatePayloadStructure,
  verifyPayloadChecksum,
  verifySegmentDigests,
  type CodecArena,
  type PayloadMeta,
} from '@splitzip/codec';
import type { ChecksumOffload } from './checksum-offload.js';
import { checkBooleanOption, checkChoiceOption, checkIntegerOption, checkOptionKeys, checkOptionsObject, kernelsArgumentTypeError, optionNames } from './check-options.js';
import { isKernelsError, KernelsError } from './errors.js';
import { planDeviceChecksum, type DeviceChecksumPlan } from './plan-device-checksum.js';
import { checkReadbackOptions, createPiecedReadback, DEFAULT_READBACK_PIECE_BYTES, DEFAULT_READBACK_STAGINGS } from './read-back-in-pieces.js';
import { DEFAULT_SLICE_ELEMENTS, planDeviceSlices, type DecodeSegmentPlan, type DecodeSlicePlan, type InputWindow } from './plan-device-slices.js';
import type { StageTimings } from './types.js';
import {
  createHashShader,
  DEFAULT_HASH_UNROLL,
  finishStreamDigests,
  HASH_GROUP_RECORD_BYTES,
  HASH_THREADS_PER_SEGMENT,
  HASH_WORKGROUP_THREADS,
} from './wgsl-checksum-source.js';
import { DECODE_SHADER, PATCH_SHADER, SLICE_RECORD_BYTES } from './wgsl-decode-sources.js';
import {
  MAP_MODE,
  USAGE,
  type GpuBufferNative,
  type GpuCommandEncoderNative,
  type GpuComputePassNative,
  type GpuComputePipelineNative,
  type GpuDeviceNative,
} from './webgpu-types.js';

/**
 * How the payload reaches the device:
 * - `write-buffer`: `queue.writeBuffer` per slice window, flushed per slice (the copy of slice k
 *   runs while slice k + 1 is written);
 * - `mapped-staging`: persistent MAP_WRITE staging buffers, filled while mapped, copied on the
 *   device, and mapped again in the background for the next call; the payload goes in pieces of
 *   about PIECE_BYTES, each copied and decoded on the device while the next is filled;
 * - `mapped-at-creation`: a fresh staging buffer per call created mapped, filled, copied, destroyed.
 */
export type WebGpuUploadMode = 'write-buffer' | 'mapped-staging' | 'mapped-at-creation';
export const WEBGPU_UPLOAD_MODES: readonly WebGpuUploadMode[] = ['write-buffer', 'mapped-staging', 'mapped-at-creation'];
/** Most checksum worker threads (`checksumThreads`): the worker decoder's pool cap. */
export const MAX_CHECKSUM_THREADS = 32;
/** The default upload: the fastest measured on the H200 (RESULTS.md). */
export const DEFAULT_WEBGPU_UPLOAD: WebGpuUploadMode = 'mapped-staging';

export interface WebGpuDecodeOptions {
  upload?: WebGpuUploadMode | undefined;
  /** Values per slice (power of two; default 2^22; raised to a chunk, lowered to the device limits). */
  sliceElements?: number | undefined;
  /** Cap on any one buffer below the device's maxBufferSize (tests use it to force several segments). */
  maxBufferBytes?: number | undefined;
  /** Cap below the device's maxComputeWorkgroupsPerDimension (tests use it to force 2-D grids). */
  maxWorkgroupsPerDimension?: number | undefined;
  /** `mapped-staging`: input bytes per upload piece (default PIECE_BYTES, 16 MiB; tests use less to force many pieces). */
  uploadPieceBytes?: number | undefined;
  /**
   * Wait for the queue after the upload, so that `uploadMs` and `kernelMs` are each stage's own
   * time. Off by default.
   */
  drainStages?: boolean | undefined;
  /**
   * Node: a shared codec arena (`createCodecArena(bytes, { threads: k })`) where payloads are
   * staged. The checksum of a payload in it is checked in place on worker threads (attached to
   * the arena's shares 0..checksumThreads-1: give those to no other thread) while this thread
   * copies the payload into the upload buffer.
   */
  arena?: CodecArena | undefined;
  /**
   * Node: check the checksum of payloads in shared memory (`arena`, or any SharedArrayBuffer) on
   * worker threads while this thread uploads (default true). False, and for ordinary arrays and
   * in browsers: on this thread, while the device copies and decodes.
   */
  checksumWorker?: boolean | undefined;
  /**
   * Node: checksum worker threads. A format-v3 payload's segment digests are computed on all of
   * them at once (each claims segment ranges) and combined on this thread; versions 1 and 2 are
   * hashed by one. Default min(4, cores - 1) (`defaultChecksumThreads()`), lowered to the
   * arena's `threads`; at most MAX_CHECKSUM_THREADS and the arena's `threads`.
   */
  checksumThreads?: number | undefined;
  /**
   * Node, format-v3 payloads in shared memory, the default pieced mapped-staging upload: the
   * checksum workers hash each segment only once this thread has copied it into the staging
   * buffers (true, the default), instead of from the start, alongside the copy (false). On the
   * H200 (two runs, RESULTS.md 02:47 and 03:12) neither wins at every size: behind the upload is
   * faster at 2^24 (5.0 vs 5.6, 2.9 vs 3.8 ms), from the start at 2^26 (20.6 vs 21.8, 15.5 vs 16.6 ms).
   */
  checksumFollowsUpload?: boolean | undefined;
  /**
   * Keep each slice's bind groups with its output buffer and reuse them when a later call decodes
   * the same geometry into it (default true); false: new bind groups on every call.
   */
  reuseBindGroups?: boolean | undefined;
  /**
   * Format-v3 payloads: the device computes the checksum segments' digests from the bytes it was
   * sent (a WGSL pass per upload piece, behind the decode), and this thread only merges them with
   * the header and escape digests, so no host thread hashes the codes and sm sections and the
   * payload may be an ordinary array. Applies when the tensor fits one device segment and its
   * slices are whole checksum segments (2^20 values or more); otherwise the host checks as usual.
   */
  checksumOnDevice?: boolean | undefined;
  /** The device checksum pass's loads in flight per thread (1..64; default DEFAULT_HASH_UNROLL). For measurements. */
  checksumOnDeviceUnroll?: number | undefined;
  /**
   * `decode` and `toArray`: bytes per readback piece (a multiple of 16; default
   * DEFAULT_READBACK_PIECE_BYTES, 4 MiB). The device copies the next pieces into kept MAP_READ
   * staging buffers while the host copies the current one out; a size past the tensor reads it in one piece.
   */
  readbackPieceBytes?: number | undefined;
  /** Staging buffers in the readback ring (1..8, default DEFAULT_READBACK_STAGINGS, 3): pieces queued ahead of the host. */
  readbackStagings?: number | undefined;
}

const WEBGPU_OPTIONS = optionNames<WebGpuDecodeOptions>({
  upload: true,
  sliceElements: true,
  maxBufferBytes: true,
  maxWorkgroupsPerDimension: true,
  uploadPieceBytes: true,
  drainStages: true,
  arena: true,
  checksumWorker: true,
  checksumThreads: true,
  checksumFollowsUpload: true,
  reuseBindGroups: true,
  checksumOnDevice: true,
  checksumOnDeviceUnroll: true,
  readbackPieceBytes: true,
  readbackStagings: true,
});
const WEBGPU_FLAGS = ['drainStages', 'checksumWorker', 'checksumFollowsUpload', 'reuseBindGroups', 'checksumOnDevice'] as const satisfies readonly (keyof WebGpuDecodeOptions)[];
/** Largest `sliceElements`: the slice plan keeps every slice-local byte offset within a u32. */
const MAX_SLICE_ELEMENTS = 2 ** 31;
/** Most loads in flight per thread of the device checksum pass (`checksumOnDeviceUnroll`). */
const MAX_HASH_UNROLL = 64;
const isPowerOfTwo = (n: number): boolean => n > 0 && 2 ** Math.round(Math.log2(n)) === n;

/** One output buffer: values [firstElement, firstElement + elementCount) as BF16, two per u32. */
export interface WebGpuOutput {
  firstElement: number;
  elementCount: number;
  buffer: GpuBufferNative;
}

export interface WebGpuDecoder {
  readonly upload: WebGpuUploadMode;
  /** Validates, uploads the payload bytes as they are, decodes; the caller owns the buffers. */
  decodeToDevice(payload: Uint8Array, verify: boolean, timings: StageTimings): Promise<WebGpuOutput[]>;
  /** The same into kept buffers, then a pieced readback into `target` (after the checksum passed). */
  decodeToHost(payload: Uint8Array, target: Uint16Array, verify: boolean, timings: StageTimings): Promise<void>;
  readBack(outputs: readonly WebGpuOutput[], target: Uint16Array): Promise<void>;
  /** Takes back outputs the caller is done with: kept for reuse by later calls (bounded), else destroyed. */
  release(outputs: readonly WebGpuOutput[]): void;
  /** Output buffers kept for reuse now (for tests). */
  readonly pooledBuffers: number;
  /** True once dispose() was called: later calls reject with DISPOSED. */
  readonly disposed: boolean;
  /** Lets the call in progress finish, rejects queued ones with DISPOSED, then destroys the kept buffers. */
  dispose(): Promise<void>;
}

const now = (): number => performance.now();
const roundUp = (x: number, m: number): number => Math.ceil(x / m) * m;
/** Kept buffers grow in steps of this, so slightly larger calls do not reallocate each time. */
const GROW_BYTES = 1 << 20;
/**
 * Released output buffers kept for reuse: creating one costs an allocation and Dawn's zero fill
 * (~4.5 ms of a 7 ms kernel stage for 128 MiB on the H200), which a reused one skips.
 */
const POOL_MAX_BUFFERS = 4;
const POOL_MAX_BYTES = 1 << 30;
/**
 * Mapped-staging uploads go in pieces of whole slices of about this many input bytes, one kept
 * staging buffer each: the device copies and decodes a piece while the host fills the next, so
 * only the last piece's copy and decode follow the host's memcpy.
 */
const PIECE_BYTES = 16 << 20;

/** Most cached bind-group sets per output buffer (payloads of many shapes into one buffer). */
const BIND_GROUP_CACHE_MAX = 1024;

interface SliceBindGroups {
  input: GpuBufferNative;
  params: GpuBufferNative;
  decode: unknown;
  patch: unknown;
}

/** A gate value past every segment: the checksum workers no longer wait for the upload. */
const GATE_OPEN = 0x7fffffff;

/** Lets the checksum workers hash segments [0, segments) (never lowers the gate). */
function raiseGate(gate: Int32Array, segments: number): void {
  if (Atomics.load(gate, 0) >= segments) return;
  Atomics.store(gate, 0, segments);
  Atomics.notify(gate, 0);
}

/** Slices [from, to) of a segment whose input windows lie in [dstStart, dstStart + bytes). */
interface UploadPiece {
  from: number;
  to: number;
  dstStart: number;
  bytes: number;
}

const windowsOf = (slice: DecodeSlicePlan): InputWindow[] =>
  [slice.codes, slice.sm, slice.escapeIndex, slice.positions, slice.exponents].filter((w): w is InputWindow => w !== null);

/** Cuts a segment into pieces of whole slices of at least `pieceBytes` input bytes (the last may be less). */
function planUploadPieces(segment: DecodeSegmentPlan, pieceBytes: number): UploadPiece[] {
  const pieces: UploadPiece[] = [];
  let piece: UploadPiece | null = null;
  segment.slices.forEach((slice, k) => {
    const windows = windowsOf(slice);
    const start = Math.min(...windows.map((w) => w.dstOffset));
    const end = Math.max(...windows.map((w) => w.dstOffset + w.bytes));
    if (piece === null || piece.bytes >= pieceBytes) {
      piece = { from: k, to: k, dstStart: start, bytes: 0 };
      pieces.push(piece);
    }
    piece.to = k + 1;
    piece.bytes = end - piece.dstStart;
  });
  return pieces;
}

/**
 * INVALID_ARGUMENT for a webgpu option out of range: the caller's mistake, checked by createKernels
 * on every host before any backend starts (inside the backend's start it became a quiet fallback to
 * the codec, or, under `auto`, to webgl2 with no reason given, and on a host without WebGPU it was
 * never checked at all).
 */
export function checkWebGpuDecodeOptions(options: WebGpuDecodeOptions): void {
  checkOptionsObject(options, 'webgpu');
  checkOptionKeys(options, WEBGPU_OPTIONS, 'createKernels', 'webgpu.');
  checkChoiceOption(options.upload, 'webgpu.upload', WEBGPU_UPLOAD_MODES);
  // NaN or null here made the slice plan NaN (no slices, or a null taken as the default).
  checkIntegerOption(options.sliceElements, 'webgpu.sliceElements', 1, MAX_SLICE_ELEMENTS);
  if (options.sliceElements !== undefined && !isPowerOfTwo(options.sliceElements)) {
    throw kernelsArgumentTypeError('webgpu.sliceElements', 'a power of two', options.sliceElements, { value: String(options.sliceElements) });
  }
  checkIntegerOption(options.maxBufferBytes, 'webgpu.maxBufferBytes', 1);
  checkIntegerOption(options.maxWorkgroupsPerDimension, 'webgpu.maxWorkgroupsPerDimension', 1);
  checkIntegerOption(options.checksumOnDeviceUnroll, 'webgpu.checksumOnDeviceUnroll', 1, MAX_HASH_UNROLL);
  checkIntegerOption(options.uploadPieceBytes, 'webgpu.uploadPieceBytes', 1);
  checkIntegerOption(options.checksumThreads, 'webgpu.checksumThreads', 1, MAX_CHECKSUM_THREADS);
  for (const name of WEBGPU_FLAGS) checkBooleanOption(options[name], `webgpu.${name}`);
  // null first (it would read as the default below), then the readback's own rules.
  checkIntegerOption(options.readbackPieceBytes, 'webgpu.readbackPieceBytes', 1);
  checkIntegerOption(options.readbackStagings, 'webgpu.readbackStagings', 1);
  checkReadbackOptions(options.readbackPieceBytes ?? DEFAULT_READBACK_PIECE_BYTES, options.readbackStagings ?? DEFAULT_READBACK_STAGINGS);
}

/**
 * Builds the two pipelines on `device` and checks they compiled; throws KERNEL_FAILED otherwise.
 * `offload` (Node's checksum worker) takes the checksums of payloads in shared memory; the
 * decoder owns it and disposes it.
 */
export async function createWebGpuDecoder(
  device: GpuDeviceNative,
  options: WebGpuDecodeOptions = {},
  offload: ChecksumOffload | null = null,
): Promise<WebGpuDecoder> {
  checkWebGpuDecodeOptions(options);
  const upload = options.upload ?? DEFAULT_WEBGPU_UPLOAD;
  const limits = {
    maxStorageBufferBindingSize: device.limits.maxStorageBufferBindingSize,
    maxBufferSize: Math.min(device.limits.maxBufferSize, options.maxBufferBytes ?? Infinity),
    maxComputeWorkgroupsPerDimension: Math.min(device.limits.maxComputeWorkgroupsPerDimension, options.maxWorkgroupsPerDimension ?? Infinity),
  };
  const sliceElements = options.sliceElements ?? DEFAULT_SLICE_ELEMENTS;
  const drainStages = options.drainStages === true;
  const pieceBytes = options.uploadPieceBytes ?? PIECE_BYTES;
  const checksumFollowsUpload = options.checksumFollowsUpload !== false;
  const reuseBindGroups = options.reuseBindGroups !== false;
  const checksumOnDevice = options.checksumOnDevice !== false;
  const hashUnroll = options.checksumOnDeviceUnroll ?? DEFAULT_HASH_UNROLL;
  const readbackPieceBytes = options.readbackPieceBytes ?? DEFAULT_READBACK_PIECE_BYTES;
  const readbackStagings = options.readbackStagings ?? DEFAULT_READBACK_STAGINGS;

  device.pushErrorScope('validation');
  const pipelines: GpuComputePipelineNative[] = [];
  const shaders: Array<readonly [string, string]> = [
    ['decode', DECODE_SHADER],
    ['patch', PATCH_SHADER],
  ];
  if (checksumOnDevice) shaders.push(['checksum', createHashShader(hashUnroll)]);
  for (const [label, code] of shaders) {
    const module = device.createShaderModule({ code });
    const info = await module.getCompilationInfo?.();
    const errors = (info?.messages ?? []).filter((m) => m.type === 'error');
    if (errors.length > 0) {
      await device.popErrorScope();
      throw new KernelsError('KERNEL_FAILED', `WGSL ${label} shader: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ')}`, {});
    }
    pipelines.push(device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } }));
  }
  const startError = await device.popErrorScope();
  if (startError) throw new KernelsError('KERNEL_FAILED', `WebGPU pipeline creation failed: ${startError.message}`, {});
  const [decodePipeline, patchPipeline, hashPipeline] = pipelines as [GpuComputePipelineNative, GpuComputePipelineNative, GpuComputePipelineNative?];
  const decodeLayout = decodePipeline.getBindGroupLayout(0);
  const patchLayout = patchPipeline.getBindGroupLayout(0);
  const hashLayout = hashPipeline?.getBindGroupLayout(0);
  /**
   * Bind groups per output buffer, reused by later calls of the same geometry into the same
   * buffers (`reuseBindGroups`): creating them costs two trips into the WebGPU implementation per
   * slice. A group names its input and params buffers, checked on reuse (they are replaced when they grow).
   */
  const bindGroupCache = new WeakMap<GpuBufferNative, Map<string, SliceBindGroups>>();
  /** The device checksum's bind groups by group geometry, with the kept buffers each names (checked on reuse). */
  const hashBindGroups = new Map<string, { bindGroup: unknown; buffers: readonly GpuBufferNative[] }>();

  // Kept across calls (queue order makes reuse safe: a later writeBuffer or copy runs after the
  // work already submitted); each grows when a call needs more.
  let input: GpuBufferNative | null = null;
  let params: GpuBufferNative | null = null;
  let hostOutput: GpuBufferNative | null = null;
  const readback = createPiecedReadback(device, readbackPieceBytes, readbackStagings);
  // The device checksum's records, group parameters, lane accumulators and their readback.
  let hashSpans: GpuBufferNative | null = null;
  let hashParams: GpuBufferNative | null = null;
  let hashLanes: GpuBufferNative | null = null;
  let hashRead: GpuBufferNative | null = null;
  /** Kept staging buffers, one per upload piece; `mapped` resolves true once mapped again (false: mapping failed). */
  const stagings: { buffer: GpuBufferNative; mapped: Promise<boolean> }[] = [];
  let disposed = false;
  /** Released outputs, oldest first; reused only at their exact size (results keep their documented size). */
  const pool: GpuBufferNative[] = [];
  const takeOutput = (bytes: number): GpuBufferNative => {
    const at = pool.findIndex((b) => b.size === bytes);
    if (at >= 0) return pool.splice(at, 1)[0]!;
    return device.createBuffer({ size: bytes, usage: USAGE.STORAGE | USAGE.COPY_SRC });
  };
  const releaseBuffers = (buffers: readonly GpuBufferNative[]): void => {
    for (const buffer of buffers) {
      if (disposed || buffer.size > POOL_MAX_BYTES) {
        buffer.destroy();
        continue;
      }
      pool.push(buffer);
      let bytes = pool.reduce((sum, b) => sum + b.size, 0);
      while (pool.length > POOL_MAX_BUFFERS || bytes > POOL_MAX_BYTES) {
        const oldest = pool.shift()!;
        bytes -= oldest.size;
        oldest.destroy();
      }
    }
  };

  const grow = (buffer: GpuBufferNative | null, bytes: number, usage: number): GpuBufferNative => {
    if (buffer && buffer.size >= bytes) return buffer;
    buffer?.destroy();
    return device.createBuffer({ size: roundUp(Math.max(bytes, 16), GROW_BYTES), usage });
  };

  /** Calls run one at a time: they share the kept buffers and the device's error scopes. */
  let tail: Promise<unknown> = Promise.resolve();
  const serial = <T>(work: () => Promise<T>): Promise<T> => {
    const result = tail.then(() => {
      if (disposed) throw new KernelsError('DISPOSED', 'the WebGPU decoder was disposed', {});
      return work();
    });
    tail = result.catch(() => undefined);
    return result;
  };

  /** Runs `work` inside validation and out-of-memory error scopes; a device error is KERNEL_FAILED. */
  async function scoped<T>(what: string, work: () => Promise<T>): Promise<T> {
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');
    const outcome = await work().then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const validation = await device.popErrorScope();
    const memory = await device.popErrorScope();
    const deviceError = memory ?? validation;
    if (deviceError) throw new KernelsError('KERNEL_FAILED', `WebGPU ${what}: ${deviceError.message}`, {});
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  /** Header, layout and structure checks; the checksum is taken later, while the device works. */
  function validate(payload: Uint8Array, verify: boolean): { meta: PayloadMeta; index: Uint32Array } {
    const meta = readPayloadMeta(payload);
    const streams = readEscapeStreams(payload, meta);
    try {
      validatePayloadStructure(payload, meta, streams);
    } catch (error) {
      // FORMAT.md's order: a bad checksum is reported before any decode-time rule.
      if (verify) verifyPayloadChecksum(payload, meta);
      throw error;
    }
    return { meta, index: streams.index };
  }

  /** Staging buffer `k`, mapped, with room for `bytes`, filled with `piece`'s windows of the payload and unmapped. */
  async function fillStaging(k: number, payload: Uint8Array, segment: DecodeSegmentPlan, piece: UploadPiece): Promise<GpuBufferNative> {
    let entry = stagings[k];
    const bytes = roundUp(piece.bytes, 4);
    if (!entry || entry.buffer.size < bytes || !(await entry.mapped)) {
      entry?.buffer.destroy();
      const buffer = device.createBuffer({ size: roundUp(bytes, GROW_BYTES), usage: USAGE.MAP_WRITE | USAGE.COPY_SRC, mappedAtCreation: true });
      entry = { buffer, mapped: Promise.resolve(true) };
      stagings[k] = entry;
    }
    try {
      const range = new Uint8Array(entry.buffer.getMappedRange(0, bytes));
      for (let i = piece.from; i < piece.to; i++) {
        for (const w of windowsOf(segment.slices[i]!)) range.set(payload.subarray(w.srcOffset, w.srcOffset + w.bytes), w.dstOffset - piece.dstStart);
      }
    } catch (error) {
      // (The caller's payload transferred mid-call, say.) Never leave the staging mapped: the
      // next call would fail to map it again, and every later call would fall back to the codec.
      entry.buffer.unmap();
      entry.mapped = Promise.resolve(false);
      throw error;
    }
    entry.buffer.unmap();
    return entry.buffer;
  }

  /** After the copy out of staging buffer `k` was submitted: map it again in the background for the next use. */
  function remapStaging(k: number): void {
    const entry = stagings[k]!;
    entry.mapped = entry.buffer.mapAsync(MAP_MODE.WRITE).then(
      () => true,
      () => false,
    );
  }

  /** Puts one segment's windows into the input buffer in one go (submitted: the copy is on its way). */
  async function uploadSegment(payload: Uint8Array, segment: DecodeSegmentPlan): Promise<void> {
    input = grow(input, segment.inputBytes, USAGE.STORAGE | USAGE.COPY_DST);
    if (upload === 'write-buffer') {
      for (const slice of segment.slices) {
        for (const w of windowsOf(slice)) device.queue.writeBuffer(input, w.dstOffset, payload, w.srcOffset, w.bytes);
        device.queue.submit([]);
      }
      return;
    }
    const whole: UploadPiece = { from: 0, to: segment.slices.length, dstStart: 0, bytes: segment.inputBytes };
    let source: GpuBufferNative;
    if (upload === 'mapped-staging') {
      source = await fillStaging(0, payload, segment, whole);
    } else {
      source = device.createBuffer({ size: roundUp(segment.inputBytes, 4), usage: USAGE.COPY_SRC, mappedAtCreation: true });
      try {
        const range = new Uint8Array(source.getMappedRange(0, roundUp(segment.inputBytes, 4)));
        for (const slice of segment.slices) {
          for (const w of windowsOf(slice)) range.set(payload.subarray(w.srcOffset, w.srcOffset + w.bytes), w.dstOffset);
        }
      } catch (error) {
        source.destroy();
        throw error;
      }
      source.unmap();
    }
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(source, 0, input, 0, roundUp(segment.inputBytes, 4));
    device.queue.submit([encoder.finish()]);
    if (upload === 'mapped-staging') remapStaging(0);
    else source.destroy();
  }

  /**
   * Pieced mapped-staging upload and dispatches: each piece's copy and its slices' dispatches are
   * submitted as soon as the piece is filled, so the device works while the host fills the next.
   * Returns the host ms spent recording and submitting the commands (params, bind groups,
   * dispatches, submit, remap), the rest being the staging fill.
   */
  async function uploadAndDispatchInPieces(
    payload: Uint8Array,
    segment: DecodeSegmentPlan,
    meta: PayloadMeta,
    out: GpuBufferNative,
    gate: Int32Array | null,
    hash: DeviceChecksumPlan | null,
    pieces: readonly UploadPiece[],
  ): Promise<number> {
    let recordMs = 0;
    let r = now();
    input = grow(input, segment.inputBytes, USAGE.STORAGE | USAGE.COPY_DST);
    const paramsBuffer = writeSegmentParams(segment, meta);
    if (hash !== null) writeHashRecords(hash);
    recordMs += now() - r;
    for (const [k, piece] of pieces.entries()) {
      const source = await fillStaging(k, payload, segment, piece);
      r = now();
      if (gate !== null) {
        // Values [0, copied) are in the staging buffers: their checksum segments may be hashed now.
        const last = segment.slices[piece.to - 1]!;
        const copied = last.firstElement + last.count;
        raiseGate(gate, copied >= meta.elementCount ? Math.ceil(copied / SEGMENT_VALUES) : Math.floor(copied / SEGMENT_VALUES));
      }
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(source, 0, input, piece.dstStart, roundUp(piece.bytes, 4));
      encodeDispatches(encoder, segment, piece.from, piece.to, out, paramsBuffer, hash, [k]);
      device.queue.submit([encoder.finish()]);
      remapStaging(k);
      recordMs += now() - r;
    }
    return recordMs;
  }

  /** Writes the device checksum's span records and per-group parameters into their kept buffers. */
  function writeHashRecords(hash: DeviceChecksumPlan): void {
    hashSpans = grow(hashSpans, hash.spans.byteLength, USAGE.STORAGE | USAGE.COPY_DST);
    device.queue.writeBuffer(hashSpans, 0, hash.spans);
    const records = new Uint32Array((hash.groups.length * HASH_GROUP_RECORD_BYTES) / 4);
    hash.groups.forEach((g, k) => records.set([g.firstSegment, g.segments], (k * HASH_GROUP_RECORD_BYTES) / 4));
    hashParams = grow(hashParams, records.byteLength, USAGE.UNIFORM | USAGE.COPY_DST);
    device.queue.writeBuffer(hashParams, 0, records);
    hashLanes = grow(hashLanes, 4 * hash.laneCount, USAGE.STORAGE | USAGE.COPY_SRC);
  }

  /**
   * The bind group of hash group `k`, reused by later calls of the same geometry while the kept
   * buffers it names are the same (`reuseBindGroups`): made anew per call they cost the host
   * ~1 ms of a 2^26 decode on the H200 (RESULTS.md, 07:37).
   */
  function hashBindGroupOf(hash: DeviceChecksumPlan, k: number): unknown {
    const g = hash.groups[k]!;
    const buffers = [hashParams!, hashSpans!, input!, hashLanes!] as const;
    const key = [k, g.baseBytes, g.endBytes, hash.spans.byteLength, hash.laneCount].join(',');
    const cached = reuseBindGroups ? hashBindGroups.get(key) : undefined;
    if (cached && cached.buffers.every((b, i) => b === buffers[i])) return cached.bindGroup;
    const bindGroup = device.createBindGroup({
      layout: hashLayout!,
      entries: [
        { binding: 0, resource: { buffer: hashParams!, offset: k * HASH_GROUP_RECORD_BYTES, size: 16 } },
        { binding: 1, resource: { buffer: hashSpans!, offset: 0, size: hash.spans.byteLength } },
        { binding: 2, resource: { buffer: input!, offset: g.baseBytes, size: g.endBytes - g.baseBytes } },
        { binding: 3, resource: { buffer: hashLanes!, offset: 0, size: 4 * hash.laneCount } },
      ],
    });
    if (reuseBindGroups) {
      if (hashBindGroups.size >= BIND_GROUP_CACHE_MAX) hashBindGroups.clear();
      hashBindGroups.set(key, { bindGroup, buffers });
    }
    return bindGroup;
  }

  /** Records the hash pass of group `k` into `pass` (its input bytes are in the input buffer by then: an earlier command). */
  function encodeHash(pass: GpuComputePassNative, hash: DeviceChecksumPlan, k: number): void {
    const g = hash.groups[k]!;
    pass.setPipeline(hashPipeline!);
    pass.setBindGroup(0, hashBindGroupOf(hash, k));
    pass.dispatchWorkgroups(Math.ceil((g.segments * HASH_THREADS_PER_SEGMENT) / HASH_WORKGROUP_THREADS), 1);
  }

  /**
   * Queues the copy of the lane accumulators into their readback buffer (after every hash pass)
   * and its mapping, which resolves with the queue: awaited alongside onSubmittedWorkDone, not
   * after it (one round trip to the device, not two).
   */
  function submitLaneReadback(hash: DeviceChecksumPlan): Promise<void> {
    const bytes = 4 * hash.laneCount;
    hashRead = grow(hashRead, bytes, USAGE.MAP_READ | USAGE.COPY_DST);
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(hashLanes!, 0, hashRead, 0, bytes);
    device.queue.submit([encoder.finish()]);
    const mapped = hashRead.mapAsync(MAP_MODE.READ, 0, bytes);
    mapped.catch(() => undefined); // awaited by checkDeviceDigests; a device error is the scope's to report
    return mapped;
  }

  /** Takes the mapped lane accumulators (submitLaneReadback) and checks the payload's checksum with them. */
  async function checkDeviceDigests(payload: Uint8Array, meta: PayloadMeta, hash: DeviceChecksumPlan, mapped: Promise<void>): Promise<void> {
    const bytes = 4 * hash.laneCount;
    const lanes = new Uint32Array(hash.laneCount);
    await mapped;
    try {
      lanes.set(new Uint32Array(hashRead!.getMappedRange(0, bytes)));
    } finally {
      hashRead!.unmap();
    }
    const digests = new Uint32Array(SEGMENT_DIGESTS * hash.segmentCount);
    finishStreamDigests(lanes, hash.streamBytes, digests);
    verifySegmentDigests(payload, meta, digests);
  }

  /** Writes one segment's slice records (parameters and codebook) into the kept params buffer. */
  function writeSegmentParams(segment: DecodeSegmentPlan, meta: PayloadMeta): GpuBufferNative {
    const records = new Uint32Array((segment.slices.length * SLICE_RECORD_BYTES) / 4);
    const book = new Uint32Array(4);
    meta.codebook.exponents.forEach((exponent, code) => {
      book[code >> 2] = book[code >> 2]! | (exponent << (8 * (code & 3)));
    });
    segment.slices.forEach((s, k) => {
      const at = (k * SLICE_RECORD_BYTES) / 4;
      records.set([s.count, s.escapes, s.firstEscape, Math.log2(meta.chunkSize), s.chunks, s.posDelta, s.expDelta, 0], at);
      records.set(book, at + 8);
    });
    params = grow(params, records.byteLength, USAGE.UNIFORM | USAGE.COPY_DST);
    device.queue.writeBuffer(params, 0, records);
    return params;
  }

  /** The bind groups of slice `k` (decode; patch where it has escapes). */
  function createSliceBindGroups(s: DecodeSlicePlan, k: number, inputBuffer: GpuBufferNative, paramsBuffer: GpuBufferNative, out: GpuBufferNative): SliceBindGroups {
    const record = { buffer: paramsBuffer, offset: k * SLICE_RECORD_BYTES, size: 48 };
    const window = (w: InputWindow) => ({ buffer: inputBuffer, offset: w.dstOffset, size: w.bytes });
    const result = { buffer: out, offset: s.outOffset, size: s.outBytes };
    const decode = device.createBindGroup({
      layout: decodeLayout,
      entries: [
        { binding: 0, resource: record },
        { binding: 1, resource: window(s.codes) },
        { binding: 2, resource: window(s.sm) },
        { binding: 3, resource: result },
      ],
    });
    const patch =
      s.escapes === 0
        ? null
        : device.createBindGroup({
            layout: patchLayout,
            entries: [
              { binding: 0, resource: record },
              { binding: 1, resource: window(s.escapeIndex!) },
              { binding: 2, resource: window(s.positions!) },
              { binding: 3, resource: window(s.exponents!) },
              { binding: 4, resource: result },
            ],
          });
    return { input: inputBuffer, params: paramsBuffer, decode, patch };
  }

  /** The cache of bind groups into `out`, keyed by slice geometry. */
  function bindGroupsOf(out: GpuBufferNative): Map<string, SliceBindGroups> {
    let cached = bindGroupCache.get(out);
    if (!cached) {
      cached = new Map();
      bindGroupCache.set(out, cached);
    }
    return cached;
  }

  /** Records the dispatches of slices [from, to) of a segment (decode, then patch where the slice has escapes). */
  function encodeDispatches(
    encoder: GpuCommandEncoderNative,
    segment: DecodeSegmentPlan,
    from: number,
    to: number,
    out: GpuBufferNative,
    paramsBuffer: GpuBufferNative,
    hash: DeviceChecksumPlan | null = null,
    hashGroups: readonly number[] = [],
  ): void {
    const inputBuffer = input!;
    const pass = encoder.beginComputePass();
    const cached = reuseBindGroups ? bindGroupsOf(out) : null;
    segment.slices.slice(from, to).forEach((s, i) => {
      const k = from + i;
      const windows = windowsOf(s);
      const key = cached === null ? '' : [k, s.outOffset, s.outBytes, ...windows.flatMap((w) => [w.dstOffset, w.bytes])].join(',');
      let groups = cached?.get(key);
      if (!groups || groups.input !== inputBuffer || groups.params !== paramsBuffer) {
        groups = createSliceBindGroups(s, k, inputBuffer, paramsBuffer, out);
        if (cached !== null) {
          if (cached.size >= BIND_GROUP_CACHE_MAX) cached.clear();
          cached.set(key, groups);
        }
      }
      pass.setPipeline(decodePipeline);
      pass.setBindGroup(0, groups.decode);
      pass.dispatchWorkgroups(s.decodeGroups[0], s.decodeGroups[1]);
      if (groups.patch === null) return;
      pass.setPipeline(patchPipeline);
      pass.setBindGroup(0, groups.patch);
      pass.dispatchWorkgroups(s.patchGroups[0], s.patchGroups[1]);
    });
    // The device checksum's passes over these slices' bytes, in the same compute pass.
    if (hash !== null) for (const k of hashGroups) encodeHash(pass, hash, k);
    pass.end();
  }

  /**
   * Starts the checksum on the offload's thread when it can take this payload (shared memory),
   * else null (this thread checks). A worker that could not run it (died, not startable) leaves
   * the check to this thread: the promise then checks here.
   */
  function startOffloadedChecksum(payload: Uint8Array, meta: PayloadMeta, gate: Int32Array | null): Promise<void> | null {
    if (offload === null) return null;
    let started: Promise<void> | null;
    try {
      started = offload.verify(payload, gate);
    } catch {
      return null;
    }
    return (
      started?.catch((error: unknown) => {
        if (!isKernelsError(error)) throw error;
        verifyPayloadChecksum(payload, meta);
      }) ?? null
    );
  }

  /**
   * Validation, then per segment: upload, dispatches; `each` gets every output once the checksum
   * passed. The structure checks make every launch memory-safe, so the upload and the launches do
   * not wait for the checksum: it runs while the device works — on the checksum worker (from the
   * start, while this thread fills the upload buffer) for a payload in shared memory, else here
   * right after the first segment's work is submitted. No output reaches `each` (the caller)
   * before it passed; on a mismatch the work is drained and the error thrown.
   */
  async function run(
    payload: Uint8Array,
    verify: boolean,
    timings: StageTimings,
    outputFor: (segment: DecodeSegmentPlan) => GpuBufferNative,
    each: (segment: DecodeSegmentPlan, out: GpuBufferNative) => Promise<void>,
  ): Promise<void> {
    let t = now();
    const { meta, index } = validate(payload, verify);
    const plan = planDeviceSlices(meta, index, limits, sliceElements);
    // The checksum workers hash v3 segments behind the pieced upload's copy (checksumFollowsUpload).
    const pieced = upload === 'mapped-staging' && !drainStages;
    const piecesOf = pieced ? plan.map((segment) => planUploadPieces(segment, pieceBytes)) : [];
    // The device hashes what it receives: one pass per upload piece, or per slice when not pieced.
    const hash =
      verify && hashPipeline !== undefined && plan.length === 1
        ? planDeviceChecksum(
            meta,
            plan,
            pieced ? piecesOf[0]!.map((p) => [p.from, p.to] as const) : plan[0]!.slices.map((_, i) => [i, i + 1] as const),
          )
        : null;
    const gate =
      verify && hash === null && pieced && checksumFollowsUpload && meta.version >= 3 && offload !== null && payload.buffer instanceof SharedArrayBuffer
        ? new Int32Array(new SharedArrayBuffer(4))
        : null;
    let offloaded = verify && hash === null ? startOffloadedChecksum(payload, meta, gate) : null;
    // Handled from the start: it may reject while this thread is still uploading.
    offloaded?.catch(() => undefined);
    let checked = !verify || offloaded !== null || hash !== null;
    timings.validateMs += now() - t;
    let submitted = false;
    /** The lanes' mapping, until checkDeviceDigests took it (a failure in between must unmap them). */
    let lanesMapped: Promise<void> | null = null;
    try {
      for (const [s, segment] of plan.entries()) {
        const out = outputFor(segment);
        t = now();
        if (pieced) {
          submitted = true;
          // The staging fill is the upload; recording and submitting the launches is `prepareMs`.
          const recordMs = await uploadAndDispatchInPieces(payload, segment, meta, out, gate, hash, piecesOf[s]!);
          timings.prepareMs += recordMs;
          timings.uploadMs += now() - t - recordMs;
          t = now();
        } else {
          await uploadSegment(payload, segment);
          if (drainStages) await device.queue.onSubmittedWorkDone();
          timings.uploadMs += now() - t;
          t = now();
          const paramsBuffer = writeSegmentParams(segment, meta);
          if (hash !== null) writeHashRecords(hash);
          const encoder = device.createCommandEncoder();
          encodeDispatches(encoder, segment, 0, segment.slices.length, out, paramsBuffer, hash, hash === null ? [] : hash.groups.map((_, k) => k));
          device.queue.submit([encoder.finish()]);
          submitted = true;
        }
        if (!checked) {
          const c = now();
          verifyPayloadChecksum(payload, meta);
          checked = true;
          timings.validateMs += now() - c;
          t += now() - c;
        }
        if (hash !== null) lanesMapped = submitLaneReadback(hash);
        await device.queue.onSubmittedWorkDone();
        timings.kernelMs += now() - t;
        if (hash !== null) {
          t = now();
          const mapped = lanesMapped!;
          lanesMapped = null;
          await checkDeviceDigests(payload, meta, hash, mapped);
          timings.validateMs += now() - t;
        }
        if (offloaded !== null) {
          // What the workers' checksum took beyond the device work (every segment may be hashed
          // now: a tensor of several device segments was not read in full yet).
          if (gate !== null) raiseGate(gate, GATE_OPEN);
          t = now();
          await offloaded;
          offloaded = null;
          timings.validateMs += now() - t;
        }
        await each(segment, out);
      }
      if (!checked) verifyPayloadChecksum(payload, meta); // an empty tensor: still the caller's check
      if (gate !== null) raiseGate(gate, GATE_OPEN);
      if (offloaded !== null) await offloaded;
    } catch (error) {
      // Nothing returns while the device still writes the outputs (the caller pools them) or a
      // worker still reads the payload (the caller may reuse it).
      if (gate !== null) raiseGate(gate, GATE_OPEN);
      if (submitted) await device.queue.onSubmittedWorkDone().catch(() => undefined);
      if (offloaded !== null) await offloaded.catch(() => undefined);
      if (lanesMapped !== null) await lanesMapped.then(() => hashRead?.unmap(), () => undefined);
      throw error;
    }
  }

  return {
    upload,

    decodeToDevice(payload, verify, timings) {
      return serial(() => {
        const outputs: WebGpuOutput[] = [];
        const taken: GpuBufferNative[] = [];
        return scoped('decode', async () => {
          await run(
            payload,
            verify,
            timings,
            (segment) => {
              const buffer = takeOutput(segment.outBytes);
              taken.push(buffer);
              return buffer;
            },
            async (segment, buffer) => {
              outputs.push({ firstElement: segment.firstElement, elementCount: segment.count, buffer });
            },
          );
          return outputs;
        }).catch((error: unknown) => {
          // Never handed out: after a payload error (a failed checksum) the buffers are sound and
          // go back to the pool; after a device error they are destroyed.
          if (isSplitZipError(error)) releaseBuffers(taken);
          else for (const buffer of taken) buffer.destroy();
          throw error;
        });
      });
    },

    decodeToHost(payload, target, verify, timings) {
      return serial(() =>
        scoped('decode', () =>
          run(
            payload,
            verify,
            timings,
            (segment) => (hostOutput = grow(hostOutput, segment.outBytes, USAGE.STORAGE | USAGE.COPY_SRC)),
            async (segment, out) => {
              // hostOutput is reused by the next segment's decode: this segment is read back first.
              const t = now();
              await readback.read([{ source: out, count: segment.count, first: segment.firstElement }], target);
              timings.readbackMs += now() - t;
            },
          ),
        ),
      );
    },

    readBack(outputs, target) {
      return serial(() =>
        scoped('readback', async () => {
          // Every segment is decoded already: their pieces go through the ring as one stream.
          await readback.read(
            outputs.map((o) => ({ source: o.buffer, count: o.elementCount, first: o.firstElement })),
            target,
          );
        }),
      );
    },

    release(outputs) {
      releaseBuffers(outputs.map((o) => o.buffer));
    },

    get pooledBuffers() {
      return pool.length;
    },

    get disposed() {
      return disposed;
    },

    async dispose() {
      if (disposed) return;
      disposed = true;
      // The call in progress still submits and maps the kept buffers: destroyed under it, it failed
      // with a device error (a false fallback reason, or an untyped rejection from a toArray).
      // Queued calls see `disposed` and reject with DISPOSED, so the tail settles soon after.
      await tail;
      readback.destroy();
      for (const buffer of [input, params, hostOutput, hashSpans, hashParams, hashLanes, hashRead, ...stagings.map((e) => e.buffer), ...pool]) buffer?.destroy();
      stagings.length = 0;
      pool.length = 0;
      await offload?.dispose();
    },
  };
}
