import { SplitZipError } from './errors.js';

/**
 * Throws INVALID_ARGUMENT when `written` (the bytes [0, writtenBytes) of `output`) and `read`
 * (bytes [0, readBytes) of `input`) are the same memory: the kernels would overwrite input they
 * have yet to read (an escape index overwritten in place could steer the patcher for ~2^32 steps).
 * O(1): compares the buffers and the byte ranges only.
 */
export function checkNoOverlap(
  input: ArrayBufferView,
  readBytes: number,
  output: ArrayBufferView,
  writtenBytes: number,
  message: string,
): void {
  if (input.buffer !== output.buffer || readBytes <= 0 || writtenBytes <= 0) return;
  const inStart = input.byteOffset;
  const outStart = output.byteOffset;
  if (inStart < outStart + writtenBytes && outStart < inStart + readBytes) {
    throw new SplitZipError('INVALID_ARGUMENT', message, {
      argument: 'out',
      inputByteOffset: inStart,
      inputBytes: readBytes,
      outByteOffset: outStart,
      outBytes: writtenBytes,
    });
  }
}
