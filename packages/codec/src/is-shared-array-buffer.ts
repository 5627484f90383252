// SharedArrayBuffer.prototype's byteLength getter accepts only a real SharedArrayBuffer (its
// internal slot), from any realm; looked up once. The global is missing on pages without
// cross-origin isolation, where no such buffer can be posted anyway.
const readSharedByteLength =
  typeof SharedArrayBuffer === 'undefined' ? undefined : Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'byteLength')?.get;

/** Whether `value` is a SharedArrayBuffer (any realm's); false where the global is missing. */
export function isSharedArrayBuffer(value: unknown): value is SharedArrayBuffer {
  if (readSharedByteLength === undefined || typeof value !== 'object' || value === null) return false;
  try {
    readSharedByteLength.call(value);
    return true;
  } catch {
    return false;
  }
}
