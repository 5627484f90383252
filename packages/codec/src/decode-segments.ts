import { kernelsFor } from './backend.js';
import { checkDigestsArray, checkSegmentRange, checkSegmentedPayload } from './check-segment-arguments.js';
import { SEGMENT_VALUES } from './constants.js';
import { checkMetaMatchesHeader, decodeValueRange, prepareEscapes, tablesForCodebook } from './decode-core.js';
import { checkOutputApart, requireOutput, type OptionsAsOutHint } from './decode-range.js';
import { readOptions } from './check-options.js';
import { optionNamesOf } from './find-unknown-option.js';
import { digestSegments } from './payload-checksum.js';
import type { PayloadMeta } from './read-payload-meta.js';

export interface DecodeSegmentsOptions {
  /**
   * Also compute the segments' checksum digests (6 per segment, as computeSegmentDigests) into
   * this array, in the same pass as the decoding where the kernels can.
   */
  digests?: Uint32Array | undefined;
}

const DECODE_SEGMENTS_OPTION_NAMES = optionNamesOf<DecodeSegmentsOptions>({ digests: true });

/** Its options (`{ digests }`; decode's `verify` too, which it then names as unknown) where its required `out` goes: its own form, not decode's. */
const OPTIONS_AS_OUT: OptionsAsOutHint = {
  // A literal list, not a spread of the option-name lists: a bundler keeps a module-level spread, and
  // this module with it, in an app importing only isSplitZipError (tree-shaking.test.ts, +0.3 kB).
  optionNames: ['digests', 'verify'],
  advice: 'options come after out, which is required, e.g. decodeSegments(payload, meta, firstSegment, endSegment, out, { digests })',
};

/**
 * Decodes the values of segments [firstSegment, endSegment) of a version-3 payload, values
 * [firstSegment * SEGMENT_VALUES, min(n, endSegment * SEGMENT_VALUES)), into out[0 ..). No
 * checksum is judged here: with `digests`, threads each decode and hash their segments and one
 * thread checks the combined list (verifySegmentDigests) before anyone uses the values. A corrupted
 * payload may instead fail a decoding rule here (a typed error either way).
 */
export function decodeSegments(
  payload: Uint8Array,
  meta: PayloadMeta,
  firstSegment: number,
  endSegment: number,
  out: Uint16Array,
  segmentOptions?: DecodeSegmentsOptions | null,
): void {
  const options = readOptions(segmentOptions, 'options', DECODE_SEGMENTS_OPTION_NAMES);
  const segmentCount = checkSegmentedPayload(payload, meta);
  checkMetaMatchesHeader(payload, meta);
  checkSegmentRange(firstSegment, endSegment, segmentCount);
  const start = Math.min(meta.elementCount, firstSegment * SEGMENT_VALUES);
  const end = Math.min(meta.elementCount, endSegment * SEGMENT_VALUES);
  const target = requireOutput(out, end - start, OPTIONS_AS_OUT);
  checkOutputApart(payload, meta.compBytes, target, end - start);
  const digests = options?.digests;
  if (digests === undefined) {
    decodeValueRange(payload, meta, start, end, target, 0);
    return;
  }
  checkDigestsArray(digests, endSegment - firstSegment, false);
  const kernels = kernelsFor(payload, target);
  const tables = tablesForCodebook(meta.codebook.exponents);
  const escapes = prepareEscapes(payload, meta, start, end, target, 0);
  let codesValid: boolean;
  if (kernels.decodeSegmentsWithDigests !== undefined) {
    codesValid = kernels.decodeSegmentsWithDigests(payload, meta.layout, firstSegment, endSegment, target, 0, tables, digests, escapes.apply);
  } else {
    codesValid = kernels.decodeValues(payload, meta.layout.codes.offsetBytes, meta.layout.sm.offsetBytes, start, end, target, 0, tables, escapes.apply);
    if (kernels.segmentDigests !== undefined) kernels.segmentDigests(payload, meta.layout, firstSegment, endSegment, digests);
    else digestSegments(payload, meta.layout, firstSegment, endSegment, digests);
  }
  decodeValueRange(payload, meta, start, end, target, 0, { codesValid, escapes });
}
