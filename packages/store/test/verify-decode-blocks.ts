// Fixtures of the blocked verify decode's tests: tensors with escapes placed where blocks meet,
// a store of them, and payloads re-signed after an edit (a valid checksum over bytes that break a
// decoding rule: only a decode finds them).
import { createCodebook, decode, readPayloadMeta, verifyPayloadChecksum } from '@splitzip/codec';
import type { CacheEntry, CacheStore } from '../src/index.js';
import type { StorageBackend } from '../src/backend.js';
import { createRng, toTestTensor, type TestTensor } from './helpers.js';

/** The codebook of these tensors: four exponents, so any other exponent is an escape and a code of 4..15 is invalid. */
export const CODEBOOK_EXPONENTS = [120, 121, 122, 123];
/** An exponent outside the codebook: its values are escapes. */
const ESCAPE_EXPONENT = 140;
/** Where the checksum sits in a payload header (FORMAT.md: u32 at byte 252, hashed as zero). */
const HEADER_CHECKSUM_OFFSET = 252;

/** A tensor with its key, digest and payload, as the other store tests make them. */
export type BlockTensor = TestTensor;

/**
 * `count` values of codebook exponents, with escapes at every multiple of each of `boundaries` and
 * the values either side of it (so escapes straddle every block edge of those sizes), and at the
 * last value.
 */
export function makeBlockTensor(count: number, boundaries: readonly number[], seed: number, chunkSize = 1024): BlockTensor {
  const rng = createRng(seed);
  const values = new Uint16Array(count);
  for (let i = 0; i < count; i++) {
    const exponent = CODEBOOK_EXPONENTS[Math.floor(rng() * CODEBOOK_EXPONENTS.length)]!;
    values[i] = ((rng() < 0.5 ? 1 : 0) << 15) | (exponent << 7) | Math.floor(rng() * 128);
  }
  const escape = (i: number) => {
    if (i >= 0 && i < count) values[i] = (values[i]! & 0x807f) | (ESCAPE_EXPONENT << 7);
  };
  for (const b of boundaries) for (let edge = b; edge < count; edge += b) for (const i of [edge - 1, edge, edge + 1]) escape(i);
  escape(count - 1);
  return toTestTensor(values, [count], createCodebook(CODEBOOK_EXPONENTS), chunkSize);
}

/** A backend serving the given payloads by key (verifyEntries reads nothing else). */
export function payloadBackend(payloads: ReadonlyMap<string, Uint8Array>): Pick<StorageBackend, 'readBlobInto' | 'checkBlob'> {
  return {
    readBlobInto: async (key: string, _blob: string, target: Uint8Array) => {
      target.set(payloads.get(key)!.subarray(0, target.length));
    },
  };
}

/** The store's entries, in insertion order. */
export function entriesOf(store: CacheStore): CacheEntry[] {
  return [...store.entries()];
}

/** Writes the checksum that makes `payload` (edited in place) pass its XXH32 again. */
export function resignPayload(payload: Uint8Array): Uint8Array {
  try {
    verifyPayloadChecksum(payload);
  } catch (error) {
    const computed = (error as { details?: { computedChecksum?: number } }).details?.computedChecksum;
    if (typeof computed !== 'number') throw error;
    new DataView(payload.buffer, payload.byteOffset).setUint32(HEADER_CHECKSUM_OFFSET, computed, true);
    verifyPayloadChecksum(payload);
  }
  return payload;
}

/** The message a whole decode gives for this payload (the old verify's, behind "blob does not decode: "). */
export function wholeDecodeMessage(payload: Uint8Array): string {
  const meta = readPayloadMeta(payload);
  try {
    decode(payload, new Uint16Array(meta.elementCount), { verify: false });
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('the payload decodes');
}

/** Sets value i's 4-bit code in the codes section. */
export function setCode(payload: Uint8Array, i: number, code: number): void {
  const at = readPayloadMeta(payload).layout.codes.offsetBytes + (i >>> 1);
  payload[at] = (i & 1) === 0 ? (payload[at]! & 0xf0) | code : (payload[at]! & 0x0f) | (code << 4);
}

/** Escape j's position (u16 LE) in the escape positions section. */
export function setEscapePosition(payload: Uint8Array, j: number, position: number): void {
  const at = readPayloadMeta(payload).layout.escapePositions.offsetBytes + 2 * j;
  payload[at] = position & 0xff;
  payload[at + 1] = position >>> 8;
}

/** Entry c of the escape index (u32 LE). */
export function setEscapeIndex(payload: Uint8Array, c: number, value: number): void {
  const at = readPayloadMeta(payload).layout.escapeIndex.offsetBytes + 4 * c;
  new DataView(payload.buffer, payload.byteOffset).setUint32(at, value, true);
}

export function readEscapeIndex(payload: Uint8Array, c: number): number {
  const at = readPayloadMeta(payload).layout.escapeIndex.offsetBytes + 4 * c;
  return new DataView(payload.buffer, payload.byteOffset).getUint32(at, true);
}
