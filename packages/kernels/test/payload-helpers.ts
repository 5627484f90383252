// Helpers the payload-verification suites share.
import { isSplitZipError } from '@splitzip/codec';

/** A copy of the payload in a SharedArrayBuffer, 256 bytes in (as a staging slot would hold it). */
export function inShared(payload: Uint8Array): Uint8Array {
  const copy = new Uint8Array(new SharedArrayBuffer(payload.length + 512), 256, payload.length);
  copy.set(payload);
  return copy;
}

/** The codec error code a promise rejects with, 'resolved', or a description of another error. */
export async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return isSplitZipError(error) ? error.code : `not a codec error: ${String(error)}`;
  }
  return 'resolved';
}
