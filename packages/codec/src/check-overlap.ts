import { SplitZipError } from './errors.js';
import { isSharedArrayBuffer } from './is-shared-array-buffer.js';

/**
 * Throws INVALID_ARGUMENT when `written` (the bytes [0, writtenBytes) of `output`) and `read`
 * (bytes [0, readBytes) of `input`) are the same memory: the kernels would overwrite input they
 * have yet to read (an escape index overwritten in place could steer the patcher for ~2^32 steps).
 * O(1): compares the buffers and the byte ranges, and for two SharedArrayBuffer objects whose
 * ranges would meet, probes one byte (below).
 */
export function checkNoOverlap(
  input: ArrayBufferView,
  readBytes: number,
  output: ArrayBufferView,
  writtenBytes: number,
  message: string,
): void {
  if (!sharesBytes(input, readBytes, output, writtenBytes)) return;
  throw new SplitZipError('INVALID_ARGUMENT', message, {
    argument: 'out',
    inputByteOffset: input.byteOffset,
    inputBytes: readBytes,
    outByteOffset: output.byteOffset,
    outBytes: writtenBytes,
  });
}

/**
 * Whether bytes [0, readBytes) of `input` and [0, writtenBytes) of `output` are (in part) the same
 * memory: one buffer, or two SharedArrayBuffer objects over one memory (probed as below, through a
 * byte of the output, which the caller is about to overwrite). O(1).
 */
export function sharesBytes(input: ArrayBufferView, readBytes: number, output: ArrayBufferView, writtenBytes: number): boolean {
  if (readBytes <= 0 || writtenBytes <= 0) return false;
  const inStart = input.byteOffset;
  const outStart = output.byteOffset;
  if (!(inStart < outStart + writtenBytes && outStart < inStart + readBytes)) return false;
  return input.buffer === output.buffer || isSameSharedMemory(input.buffer, output.buffer, Math.max(inStart, outStart));
}

/**
 * Two SharedArrayBuffer objects can be one memory: a buffer posted to a worker twice, or
 * structuredClone'd, arrives as a second object (and a grown WebAssembly.Memory hands out a new,
 * longer one), with the same offsets. Flips the byte at `at` through the output's buffer (which
 * the caller is about to overwrite anyway), sees whether the input's changed with it, and puts it
 * back: the same memory only if the input's byte followed both the flip and the restore.
 */
function isSameSharedMemory(inputBuffer: ArrayBufferLike, outputBuffer: ArrayBufferLike, at: number): boolean {
  if (!isSharedArrayBuffer(inputBuffer) || !isSharedArrayBuffer(outputBuffer)) return false;
  const outByte = new Uint8Array(outputBuffer, at, 1);
  const inByte = new Uint8Array(inputBuffer, at, 1);
  const old = outByte[0]!;
  outByte[0] = old ^ 0xff;
  const followedFlip = inByte[0] === (old ^ 0xff);
  outByte[0] = old;
  return followedFlip && inByte[0] === old;
}
