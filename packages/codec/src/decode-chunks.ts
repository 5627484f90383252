import { checkMetaFitsPayload, checkMetaMatchesHeader, decodeValueRange } from './decode-core.js';
import { checkOutputApart, requireOutput } from './decode-range.js';
import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';
import type { PayloadMeta } from './read-payload-meta.js';

/**
 * Decodes chunks [firstChunk, firstChunk + chunkCount) into out, indexed from the first chunk's
 * first value. For splitting one payload across workers: no checksum here (verify once up front).
 */
export function decodeChunks(
  payload: Uint8Array,
  meta: PayloadMeta,
  firstChunk: number,
  chunkCount: number,
  out: Uint16Array,
): void {
  checkMetaFitsPayload(payload, meta);
  checkMetaMatchesHeader(payload, meta);
  if (
    !Number.isInteger(firstChunk) ||
    !Number.isInteger(chunkCount) ||
    firstChunk < 0 ||
    chunkCount < 0 ||
    firstChunk + chunkCount > meta.chunkCount
  ) {
    throw new SplitZipError('INVALID_ARGUMENT', `chunks [${describeValue(firstChunk)}, ${describeValue(firstChunk)}+${describeValue(chunkCount)}) outside 0..${meta.chunkCount}`, {
      firstChunk,
      chunkCount,
      payloadChunkCount: meta.chunkCount,
    });
  }
  const start = firstChunk * meta.chunkSize;
  const end = Math.min(meta.elementCount, (firstChunk + chunkCount) * meta.chunkSize);
  const target = requireOutput(out, Math.max(0, end - start));
  checkOutputApart(payload, meta.compBytes, target, end - start);
  decodeValueRange(payload, meta, start, end, target, 0);
}
