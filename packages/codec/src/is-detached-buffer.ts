/**
 * Whether `buffer` was detached (transferred to another thread, or by ArrayBuffer#transfer). O(1);
 * worth asking only of an empty view: a detached buffer's views read as empty, so an empty input
 * could otherwise be taken for an empty tensor (and encoded as a payload of 0 values).
 */
export function isDetachedBuffer(buffer: ArrayBufferLike): boolean {
  if (buffer.byteLength !== 0) return false;
  const flag = (buffer as { detached?: unknown }).detached;
  if (typeof flag === 'boolean') return flag;
  try {
    new Uint8Array(buffer);
    return false;
  } catch {
    return true;
  }
}
