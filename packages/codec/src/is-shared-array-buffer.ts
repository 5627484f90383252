// SharedArrayBuffer.prototype's byteLength getter accepts only a real SharedArrayBuffer (its
// internal slot), from any realm; looked up once. The global is missing on pages without
// cross-origin isolation, where no such buffer can be posted anyway.
const readSharedByteLength =
  typeof SharedArrayBuffer === 'undefined' ? undefined : Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'byteLength')?.get;

/** Whether `value` is a SharedArrayBuffer (any realm's); false where the global is missing. */
export function isSharedArrayBuffer(value: unknown): value is SharedArrayBuffer {
  if (readSharedByteLength === undefined || typeof value !== 'object' || value === null) return false;
  // The common answer without a throw (a thrown TypeError costs microseconds, and encode and
  // decode ask on every call whose two buffers start at the same offset): a plain ArrayBuffer,
  // or anything whose tag is not SharedArrayBuffer's. The getter below settles what claims to be one.
  if (value instanceof ArrayBuffer || Object.prototype.toString.call(value) !== '[object SharedArrayBuffer]') return false;
  try {
    readSharedByteLength.call(value);
    return true;
  } catch {
    return false;
  }
}
