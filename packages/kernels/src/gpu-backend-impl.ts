import {
  createPayloadWriter,
  readEscapeStreams,
  readPayloadMeta,
  SplitZipError,
  validatePayloadStructure,
  verifyPayloadChecksum,
} from '@splitzip/codec';
import type { BackendImpl } from './backend-impl.js';
import { checkEncodeArguments, checkOutputApart } from './check-call-arguments.js';
import { checkOutput } from './check-output.js';
import { KernelsError } from './errors.js';
import type { GpuBackend } from './gpu-backend.js';
import { LAUNCH_MAX_ELEMENTS, READBACK_BIAS } from './kernel-sources.js';
import { countDecodeLaunches, packDecodeLaunch } from './pack-decode-launch.js';
import { emptyTimings } from './timings.js';
import type { DeviceSegment, StageTimings } from './types.js';

const now = (): number => performance.now();

/** Drives a gpu.js backend launch by launch: validation and packing on the host, kernels there. */
export function createGpuBackendImpl(gpu: GpuBackend): BackendImpl {
  /** Validates (codec header + checksum, then every decode-time rule) and runs each launch. */
  async function runDecode(
    payload: Uint8Array,
    verify: boolean,
    bias: number,
    timings: StageTimings,
    onLaunch: (handle: unknown, firstElement: number, elementCount: number) => Promise<void>,
  ): Promise<number> {
    let t = now();
    const meta = readPayloadMeta(payload);
    if (verify) verifyPayloadChecksum(payload, meta);
    const streams = readEscapeStreams(payload, meta);
    validatePayloadStructure(payload, meta, streams);
    const codebook = new Float32Array(16);
    meta.codebook.exponents.forEach((exponent, code) => {
      codebook[code] = exponent;
    });
    timings.validateMs += now() - t;
    let scratch: Float32Array | undefined;
    const launches = countDecodeLaunches(meta.elementCount);
    const payloadLength = payload.length;
    for (let launch = 0; launch < launches; launch++) {
      t = now();
      // Later launches read the payload after an await: the caller may have transferred it since.
      checkIntact(payload, payloadLength, 'payload');
      const inputs = packDecodeLaunch(payload, meta, streams, launch, scratch);
      scratch = inputs.words;
      timings.prepareMs += now() - t;
      const handle = await gpu.decodeLaunch(inputs, codebook, meta.chunkSize, bias, timings);
      await onLaunch(handle, inputs.firstElement, inputs.elementCount);
    }
    return meta.elementCount;
  }

  return {
    name: gpu.name,

    async decode(payload, out, options) {
      const timings = emptyTimings();
      const start = now();
      const meta = readPayloadMeta(payload);
      const target = checkOutput(out, meta.elementCount);
      // Later launches would read payload bytes the earlier ones overwrote: the codec's rule.
      checkOutputApart(payload, meta.compBytes, target, meta.elementCount);
      await runDecode(payload, options?.verify !== false, READBACK_BIAS, timings, async (handle, first, count) => {
        const t = now();
        try {
          const floats = await gpu.readHandle(handle);
          // The caller may have transferred `out` while we waited: its mistake, not the backend's.
          checkOutIntact(target, meta.elementCount);
          // Each float is 2^23 + value: its low 16 bits are the value, so an integer narrowing copy
          // (u32 -> u16 keeps the low half) extracts them.
          target.set(new Uint32Array(floats.buffer, floats.byteOffset, count), first);
        } finally {
          gpu.deleteHandle(handle);
        }
        timings.readbackMs += now() - t;
      });
      timings.totalMs = now() - start;
      return { backend: gpu.name, fallbackReason: null, values: target, timings };
    },

    async decodeToDevice(payload, options) {
      const timings = emptyTimings();
      const start = now();
      const segments: DeviceSegment[] = [];
      let elementCount: number;
      try {
        elementCount = await runDecode(payload, options?.verify !== false, 0, timings, async (handle, first, count) => {
          segments.push({ firstElement: first, elementCount: count, handle });
        });
      } catch (error) {
        for (const segment of segments) gpu.deleteHandle(segment.handle);
        throw error;
      }
      timings.totalMs = now() - start;
      let deleted = false;
      return {
        backend: gpu.name,
        fallbackReason: null,
        elementCount,
        location: gpu.location,
        layout: 'float',
        segments,
        timings,
        async toArray<TBuffer extends ArrayBufferLike = ArrayBuffer>(out?: Uint16Array<TBuffer>): Promise<Uint16Array<TBuffer>> {
          if (deleted) throw new KernelsError('DISPOSED', 'this device result was deleted', {});
          // The textures went with the instance's context: reading them gives zeros or a TypeError.
          if (gpu.disposed) throw new KernelsError('DISPOSED', 'the Kernels instance of this device result was disposed', {});
          const target = checkOutput(out, elementCount);
          for (const segment of segments) {
            // A dispose meanwhile is DISPOSED from readHandle itself (its checkLost).
            const floats = await gpu.readHandle(segment.handle);
            checkOutIntact(target, elementCount);
            target.set(floats.subarray(0, segment.elementCount), segment.firstElement);
          }
          return target;
        },
        delete() {
          if (deleted) return;
          deleted = true;
          for (const segment of segments) gpu.deleteHandle(segment.handle);
        },
      };
    },

    async encode(values, codebook, options) {
      const timings = emptyTimings();
      const start = now();
      let t = start;
      const { book, chunkSize } = checkEncodeArguments(values, codebook, options?.chunkSize);
      const n = values.length;
      // exponent -> code, 16 for an escape.
      const codeOfExponent = new Uint8Array(256).fill(16);
      book.exponents.forEach((exponent, code) => {
        codeOfExponent[exponent] = code;
      });
      const codeTable = Float32Array.from(codeOfExponent);
      const chunkCount = Math.ceil(n / chunkSize);
      const escapeCounts = new Uint32Array(chunkCount);
      const wordLaunches: Float32Array[] = [];
      let scratch: Float32Array | undefined;
      timings.prepareMs += now() - t;
      for (let first = 0; first < n; first += LAUNCH_MAX_ELEMENTS) {
        t = now();
        const count = Math.min(LAUNCH_MAX_ELEMENTS, n - first);
        const floats = scratch && scratch.length >= count ? scratch.subarray(0, count) : new Float32Array(count);
        floats.set(values.subarray(first, first + count));
        scratch = floats;
        timings.prepareMs += now() - t;
        const result = await gpu.encodeLaunch(floats, codeTable, chunkSize, timings);
        // The next launch and the escape scatter below read `values` again: a caller that
        // transferred it meanwhile would get a valid payload of other values.
        checkIntact(values, n, 'values');
        verifyEncodeSample(gpu.name, values, first, count, chunkSize, codeOfExponent, result);
        wordLaunches.push(result.words.slice(0, Math.ceil(count / 2)));
        const chunk0 = first / chunkSize;
        for (let k = 0; k < Math.ceil(count / chunkSize); k++) escapeCounts[chunk0 + k] = result.escapeCounts[k]!;
      }

      t = now();
      let escapeCount = 0;
      for (let c = 0; c < chunkCount; c++) escapeCount += escapeCounts[c]!;
      const writer = createPayloadWriter(n, escapeCount, book, chunkSize);
      // Codes and sign/mantissa bytes from the pair words; sm starts 256-aligned in a fresh payload.
      const { codes, sm } = writer;
      const sm16 = new Uint16Array(sm.buffer, sm.byteOffset, n >>> 1);
      for (let launch = 0; launch < wordLaunches.length; launch++) {
        const words = wordLaunches[launch]!;
        const pair0 = (launch * LAUNCH_MAX_ELEMENTS) / 2;
        const full = Math.min(words.length, (n >>> 1) - pair0);
        for (let j = 0; j < full; j++) {
          const w = words[j]!;
          codes[pair0 + j] = w & 0xff;
          sm16[pair0 + j] = w >>> 8;
        }
        if (full < words.length) {
          const w = words[full]!;
          codes[pair0 + full] = w & 0xff;
          sm[n - 1] = (w >>> 8) & 0xff;
        }
      }
      // Escape scatter on the host: only chunks the GPU counted escapes in are scanned.
      const { escapeIndex, escapePositions, escapeExponents } = writer;
      let j = 0;
      for (let c = 0; c < chunkCount; c++) {
        escapeIndex[c] = j;
        const expected = j + escapeCounts[c]!;
        if (escapeCounts[c] === 0) continue;
        const chunkStart = c * chunkSize;
        const chunkEnd = Math.min(n, chunkStart + chunkSize);
        for (let i = chunkStart; i < chunkEnd; i++) {
          const exponent = (values[i]! >>> 7) & 0xff;
          if (codeOfExponent[exponent] === 16) {
            if (j >= expected) break;
            escapePositions[j] = i - chunkStart;
            escapeExponents[j] = exponent;
            j++;
          }
        }
        if (j !== expected) {
          throw new KernelsError('KERNEL_FAILED', `${gpu.name} counted ${escapeCounts[c]} escapes in chunk ${c}, the host found a different number`, {
            backend: gpu.name,
            chunk: c,
          });
        }
      }
      escapeIndex[chunkCount] = j;
      // The writer's own new ArrayBuffer (createPayloadWriter allocates it; seal() types it wide).
      const payload = writer.seal() as Uint8Array<ArrayBuffer>;
      timings.finishMs += now() - t;
      timings.totalMs = now() - start;
      return { backend: gpu.name, fallbackReason: null, payload, timings };
    },

    dispose() {
      return gpu.dispose();
    },
  };
}

/** INVALID_ARGUMENT naming `name` when the caller's array was detached or resized during the call. */
function checkIntact(view: ArrayBufferView & { length: number }, length: number, name: string): void {
  if (view.length !== length) {
    throw new KernelsError('INVALID_ARGUMENT', `${name} was detached or resized while the call was in flight`, {
      argument: name,
      length: view.length,
      expected: length,
    });
  }
}

/** `out` detached or shrunk during the call: the codec's OUTPUT_TOO_SMALL, as checkOutput reports it up front. */
function checkOutIntact(out: Uint16Array, count: number): void {
  if (out.length < count) {
    throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${out.length} values, ${count} needed (detached or resized during the call)`, {
      argument: 'out',
      outLength: out.length,
      needed: count,
    });
  }
}

/** Chunks of each encode launch whose pair words and escape count the host recomputes. */
const ENCODE_SAMPLE_CHUNKS = 4;

/**
 * Recomputes a few whole chunks of an encode launch on the host (first, last and evenly spaced):
 * a GPU result of zeros (a lost context) or a partial one must not become a valid payload.
 */
export function verifyEncodeSample(
  backend: string,
  values: Uint16Array,
  first: number,
  count: number,
  chunkSize: number,
  codeOfExponent: Uint8Array,
  result: { words: ArrayLike<number>; escapeCounts: ArrayLike<number> },
): void {
  const chunks = Math.ceil(count / chunkSize);
  const picked = new Set<number>();
  for (let s = 0; s < ENCODE_SAMPLE_CHUNKS; s++) picked.add(Math.floor((s * (chunks - 1)) / Math.max(1, ENCODE_SAMPLE_CHUNKS - 1)));
  const fail = (what: string, chunk: number): never => {
    throw new KernelsError('KERNEL_FAILED', `${backend} returned a wrong ${what} in chunk ${(first / chunkSize) + chunk} (host recomputation)`, {
      backend,
      chunk: first / chunkSize + chunk,
    });
  };
  for (const k of picked) {
    const start = k * chunkSize;
    const end = Math.min(count, start + chunkSize);
    let escapes = 0;
    for (let i = start; i < end; i += 2) {
      const v0 = values[first + i]!;
      const c0 = codeOfExponent[(v0 >>> 7) & 0xff]!;
      if (c0 === 16) escapes++;
      let word = (c0 === 16 ? 0 : c0) | (((v0 >>> 8) & 0x80) | (v0 & 0x7f)) << 8;
      if (i + 1 < end) {
        const v1 = values[first + i + 1]!;
        const c1 = codeOfExponent[(v1 >>> 7) & 0xff]!;
        if (c1 === 16) escapes++;
        word += ((c1 === 16 ? 0 : c1) << 4) + ((((v1 >>> 8) & 0x80) | (v1 & 0x7f)) << 16);
      }
      if (result.words[i >>> 1] !== word) fail('pair word', k);
    }
    if (result.escapeCounts[k] !== escapes) fail('escape count', k);
  }
}
