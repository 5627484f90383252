import type { EscapeStreams, PayloadMeta } from '@splitzip/codec';
import { LAUNCH_MAX_ELEMENTS } from './kernel-sources.js';

/** The float inputs of one decode launch (values [firstElement, firstElement + elementCount)). */
export interface DecodeLaunch {
  firstElement: number;
  elementCount: number;
  /** ceil(elementCount / 2) words: codeByte | sm[2j] << 8 | sm[2j+1] << 16. */
  words: Float32Array;
  /** chunksInLaunch + 1 escape-index entries, rebased to the launch's first escape. */
  escStart: Float32Array;
  /** position * 256 + exponent per escape of the launch (at least one entry, unused when none). */
  escEntries: Float32Array;
}

/** Launch boundaries: every launch but the last holds LAUNCH_MAX_ELEMENTS values (whole chunks). */
export function countDecodeLaunches(elementCount: number): number {
  return Math.ceil(elementCount / LAUNCH_MAX_ELEMENTS);
}

/**
 * Packs launch `launch` of a validated payload into floats holding integers below 2^24 (exact on
 * every gpu.js backend): three payload bytes per float, so the upload is 2 bytes per value, the
 * size of the raw BF16 tensor, instead of 6 bytes if each byte were its own float.
 * `scratch` words are reused when large enough.
 */
export function packDecodeLaunch(
  payload: Uint8Array,
  meta: PayloadMeta,
  streams: EscapeStreams,
  launch: number,
  scratch?: Float32Array,
): DecodeLaunch {
  const firstElement = launch * LAUNCH_MAX_ELEMENTS;
  const elementCount = Math.min(LAUNCH_MAX_ELEMENTS, meta.elementCount - firstElement);
  const pairCount = Math.ceil(elementCount / 2);
  const words = scratch && scratch.length >= pairCount ? scratch.subarray(0, pairCount) : new Float32Array(pairCount);
  const codesAt = meta.layout.codes.offsetBytes + firstElement / 2;
  const smAt = meta.layout.sm.offsetBytes + firstElement;
  const fullPairs = elementCount >>> 1;
  const codes = payload.subarray(codesAt, codesAt + pairCount);
  if ((payload.byteOffset + smAt) % 2 === 0) {
    // Aligned: one 16-bit load gives both sign/mantissa bytes of a pair (little-endian).
    const sm16 = new Uint16Array(payload.buffer, payload.byteOffset + smAt, fullPairs);
    for (let j = 0; j < fullPairs; j++) words[j] = codes[j]! | (sm16[j]! << 8);
  } else {
    const sm = payload.subarray(smAt, smAt + elementCount);
    for (let j = 0; j < fullPairs; j++) words[j] = codes[j]! | (sm[2 * j]! << 8) | (sm[2 * j + 1]! << 16);
  }
  if (pairCount > fullPairs) words[fullPairs] = codes[fullPairs]! | (payload[smAt + elementCount - 1]! << 8);

  const { chunkSize } = meta;
  const firstChunk = firstElement / chunkSize;
  const chunkCount = Math.ceil(elementCount / chunkSize);
  const escBase = streams.index[firstChunk]!;
  const escEnd = streams.index[firstChunk + chunkCount]!;
  const escStart = new Float32Array(chunkCount + 1);
  for (let k = 0; k <= chunkCount; k++) escStart[k] = streams.index[firstChunk + k]! - escBase;
  const escEntries = new Float32Array(Math.max(1, escEnd - escBase));
  for (let m = escBase; m < escEnd; m++) {
    escEntries[m - escBase] = streams.positions[m]! * 256 + streams.exponents[m]!;
  }
  return { firstElement, elementCount, words, escStart, escEntries };
}
