import { checkMetaFitsPayload, checkMetaMatchesHeader, decodeValueRange } from './decode-core.js';
import { checkOutputApart, requireOutput, type OptionsAsOutHint } from './decode-range.js';
import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';
import type { PayloadMeta } from './read-payload-meta.js';

/**
 * decodeChunks takes no options: `{ verify: false }` (decode's) or `{ digests }` (decodeSegments')
 * where its required `out` goes gets its own form, not decode's.
 */
const OPTIONS_AS_OUT: OptionsAsOutHint = {
  // A literal list, not a spread of the option-name lists: a bundler keeps a module-level spread, and
  // this module with it, in an app importing only isSplitZipError (tree-shaking.test.ts, +0.3 kB).
  optionNames: ['verify', 'digests'],
  advice: 'decodeChunks takes no options (it judges no checksum: verify once up front), and out is required: decodeChunks(payload, meta, firstChunk, chunkCount, out)',
};

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
  const target = requireOutput(out, Math.max(0, end - start), OPTIONS_AS_OUT);
  checkOutputApart(payload, meta.compBytes, target, end - start);
  decodeValueRange(payload, meta, start, end, target, 0);
}
