import { kernelsFor } from './backend.js';
import { decodeValueRange, prepareEscapes, tablesForCodebook } from './decode-core.js';
import { readOptions } from './check-options.js';
import { checkOutput, checkOutputApart, DECODE_CALL, DECODE_OPTION_NAMES, skipsChecksum, type DecodeOptions } from './decode-range.js';
import { SplitZipError } from './errors.js';
import { computePayloadChecksum } from './payload-checksum.js';
import { readPayloadMeta } from './read-payload-meta.js';
import { verifyPayloadChecksum } from './verify-payload-checksum.js';

/**
 * Decodes a whole payload into `out` (allocated if absent, at the payload's length) and returns
 * `out` itself, not a view of it: a longer `out` comes back whole, the values in its first
 * `meta.elementCount` elements and its tail as it was; take `out.subarray(0, n)` for the values
 * alone (unlike `encode` with `out` and `decodeRange`, which return trimmed views).
 * On an error the contents of `out` are unspecified. When the payload and `out` live in a codec
 * arena the kernels read and write them in place (no copies); they must not overlap.
 */
export function decode(payload: Uint8Array, out?: undefined, options?: DecodeOptions | null): Uint16Array<ArrayBuffer>;
export function decode<TBuffer extends ArrayBufferLike>(payload: Uint8Array, out: Uint16Array<TBuffer>, options?: DecodeOptions | null): Uint16Array<TBuffer>;
export function decode(payload: Uint8Array, out?: Uint16Array, options?: DecodeOptions | null): Uint16Array;
export function decode(payload: Uint8Array, out?: Uint16Array, decodeOptions?: DecodeOptions | null): Uint16Array {
  const meta = readPayloadMeta(payload);
  const options = readOptions(decodeOptions, 'options', DECODE_OPTION_NAMES);
  const target = checkOutput(out, meta.elementCount, DECODE_CALL);
  checkOutputApart(payload, meta.compBytes, target, meta.elementCount);
  if (skipsChecksum(options)) {
    decodeValueRange(payload, meta, 0, meta.elementCount, target, 0);
    return target;
  }
  const fused = kernelsFor(payload, target).decodeAllWithDigests;
  if (fused === undefined) {
    verifyPayloadChecksum(payload, meta);
    decodeValueRange(payload, meta, 0, meta.elementCount, target, 0);
    return target;
  }
  // One pass decodes and hashes the big sections (and patches the escapes block by block when
  // they are well-formed); the checksum is still judged before any decoding rule (FORMAT.md order).
  const n = meta.elementCount;
  const escapes = prepareEscapes(payload, meta, 0, n, target, 0);
  const result = fused(payload, meta.layout, n, target, tablesForCodebook(meta.codebook.exponents), meta.version, escapes.apply);
  const checksum = computePayloadChecksum(payload, meta.layout, meta.version, result.digests);
  if (checksum !== meta.checksum) {
    throw new SplitZipError('CHECKSUM_MISMATCH', 'payload checksum does not match its contents', {
      storedChecksum: meta.checksum,
      computedChecksum: checksum,
    });
  }
  decodeValueRange(payload, meta, 0, n, target, 0, { codesValid: result.codesValid, escapes });
  return target;
}
