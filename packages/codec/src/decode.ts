import { activeKernels } from './backend.js';
import { decodeValueRange, tablesForCodebook } from './decode-core.js';
import { checkOutput, type DecodeOptions } from './decode-range.js';
import { SplitZipError } from './errors.js';
import { readPayloadMeta } from './read-payload-meta.js';
import { verifyPayloadChecksum } from './verify-payload-checksum.js';

/**
 * Decodes a whole payload into `out` (allocated if absent; may be longer) and returns it.
 * On an error the contents of `out` are unspecified.
 */
export function decode(payload: Uint8Array, out?: Uint16Array, options?: DecodeOptions): Uint16Array {
  const meta = readPayloadMeta(payload);
  const target = checkOutput(out, meta.elementCount);
  if (options?.verify === false) {
    decodeValueRange(payload, meta, 0, meta.elementCount, target, 0);
    return target;
  }
  const fused = activeKernels().decodeAllWithChecksum;
  if (fused === undefined) {
    verifyPayloadChecksum(payload, meta);
    decodeValueRange(payload, meta, 0, meta.elementCount, target, 0);
    return target;
  }
  // One pass decodes and hashes; the checksum is still judged before any decoding rule (FORMAT.md order).
  const { layout } = meta;
  const result = fused(
    payload,
    { codesOffset: layout.codes.offsetBytes, smOffset: layout.sm.offsetBytes, totalBytes: layout.totalBytes },
    meta.elementCount,
    target,
    tablesForCodebook(meta.codebook.exponents),
  );
  if (result.checksum !== meta.checksum) {
    throw new SplitZipError('CHECKSUM_MISMATCH', 'payload checksum does not match its contents', {
      storedChecksum: meta.checksum,
      computedChecksum: result.checksum,
    });
  }
  decodeValueRange(payload, meta, 0, meta.elementCount, target, 0, { codesValid: result.codesValid });
  return target;
}
