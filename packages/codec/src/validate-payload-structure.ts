import { argumentTypeError } from './argument-type-error.js';
import { checkMetaFitsPayload } from './decode-core.js';
import { isUint16Array, isUint32Array } from './typed-array-kind.js';
import { SplitZipError } from './errors.js';
import type { PayloadMeta } from './read-payload-meta.js';

/** A read-only view of the escape index and escape stream, aligned copies where the payload is not. */
export interface EscapeStreams {
  /** chunk_count + 1 prefix sums. */
  index: Uint32Array;
  positions: Uint16Array;
  exponents: Uint8Array;
}

/** Views of the payload's escape sections (copies when the payload's offset breaks alignment). */
export function readEscapeStreams(payload: Uint8Array, meta: PayloadMeta): EscapeStreams {
  // A Uint8Array as long as its meta says (TRUNCATED, INVALID_ARGUMENT otherwise), as every function taking `meta` checks.
  checkMetaFitsPayload(payload, meta);
  const { escapeIndex, escapePositions, escapeExponents } = meta.layout;
  const indexAt = payload.byteOffset + escapeIndex.offsetBytes;
  const posAt = payload.byteOffset + escapePositions.offsetBytes;
  const index =
    indexAt % 4 === 0
      ? new Uint32Array(payload.buffer, indexAt, meta.chunkCount + 1)
      : new Uint32Array(new Uint8Array(payload.subarray(escapeIndex.offsetBytes, escapeIndex.offsetBytes + escapeIndex.byteLength)).buffer);
  const positions =
    posAt % 2 === 0
      ? new Uint16Array(payload.buffer, posAt, meta.escapeCount)
      : new Uint16Array(new Uint8Array(payload.subarray(escapePositions.offsetBytes, escapePositions.offsetBytes + 2 * meta.escapeCount)).buffer);
  const exponents = payload.subarray(escapeExponents.offsetBytes, escapeExponents.offsetBytes + meta.escapeCount);
  return { index, positions, exponents };
}

/**
 * The decode-time rules of FORMAT.md (reader rule 8), checked on the host before any kernel
 * launches, because gpu.js kernels do not bounds-check: the escape index, the escape positions,
 * every code below the codebook size, and a zero padding nibble. `meta` comes from the codec's
 * `readPayloadMeta`, which has already checked the header and the section layout.
 */
export function validatePayloadStructure(payload: Uint8Array, meta: PayloadMeta, streams: EscapeStreams): void {
  // Another kind of view read as undefined or 16-bit codes and passed every code check.
  checkMetaFitsPayload(payload, meta);
  const { chunkSize, chunkCount, escapeCount, elementCount } = meta;
  const index: unknown = streams?.index;
  const positions: unknown = streams?.positions;
  // Short or other arrays would read as undefined and pass the index and position checks.
  if (!isUint32Array(index) || index.length < chunkCount + 1 || !isUint16Array(positions) || positions.length < escapeCount) {
    throw argumentTypeError('streams', 'readEscapeStreams(payload, meta)', streams);
  }
  if (index[0] !== 0 || index[chunkCount] !== escapeCount) {
    throw new SplitZipError('BAD_ESCAPE_INDEX', 'escape index must start at 0 and end at escape_count', {
      first: index[0],
      last: index[chunkCount],
      escapeCount,
    });
  }
  for (let c = 0; c < chunkCount; c++) {
    const first = index[c]!;
    const end = index[c + 1]!;
    const chunkLength = Math.min(chunkSize, elementCount - c * chunkSize);
    if (end < first || end > escapeCount || end - first > chunkLength) {
      throw new SplitZipError('BAD_ESCAPE_INDEX', `escape index of chunk ${c} is inconsistent`, {
        chunk: c,
        indexStart: first,
        indexEnd: end,
        escapeCount,
        chunkLength,
      });
    }
    let last = -1;
    for (let j = first; j < end; j++) {
      const pos = positions[j]!;
      if (pos <= last || pos >= chunkLength) {
        throw new SplitZipError('BAD_ESCAPE_POSITION', `escape ${j} of chunk ${c} is out of order or outside the chunk`, {
          chunk: c,
          escape: j,
          position: pos,
          previousPosition: last,
          chunkLength,
        });
      }
      last = pos;
    }
  }
  const codesAt = meta.layout.codes.offsetBytes;
  const size = meta.codebook.exponents.length;
  const pairs = elementCount >>> 1;
  if (size < 16) {
    // A code byte holds two codes; both nibbles must index the codebook.
    const limit = size;
    for (let j = 0; j < pairs; j++) {
      const b = payload[codesAt + j]!;
      if ((b & 15) >= limit || b >>> 4 >= limit) throw invalidCode(payload, meta, 2 * j, size);
    }
    if ((elementCount & 1) === 1 && (payload[codesAt + pairs]! & 15) >= limit) {
      throw invalidCode(payload, meta, elementCount - 1, size);
    }
  }
  if ((elementCount & 1) === 1 && payload[codesAt + pairs]! >>> 4 !== 0) {
    throw new SplitZipError('INVALID_CODE', 'the padding nibble after the last code must be 0', {
      offsetBytes: codesAt + pairs,
    });
  }
}

function invalidCode(payload: Uint8Array, meta: PayloadMeta, from: number, size: number): SplitZipError {
  const codesAt = meta.layout.codes.offsetBytes;
  for (let i = from; i < Math.min(from + 2, meta.elementCount); i++) {
    const b = payload[codesAt + (i >>> 1)]!;
    const code = (i & 1) === 0 ? b & 15 : b >>> 4;
    if (code >= size) {
      return new SplitZipError('INVALID_CODE', `value ${i} has code ${code}, codebook has ${size} entries`, {
        index: i,
        code,
        codebookSize: size,
        offsetBytes: codesAt + (i >>> 1),
      });
    }
  }
  return new SplitZipError('INVALID_CODE', 'a code is outside the codebook', { codebookSize: size });
}
