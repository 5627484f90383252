import { checkNoOverlap } from './check-overlap.js';
import { decodeValueRange } from './decode-core.js';
import { SplitZipError } from './errors.js';
import { readPayloadMeta } from './read-payload-meta.js';
import { verifyPayloadChecksum } from './verify-payload-checksum.js';

export interface DecodeOptions {
  /** Check the payload's XXH32 first (default true). It covers the whole payload, even for a small range. */
  verify?: boolean | undefined;
}

/** Decodes values [start, start + count) into out[0 .. count) (allocated if absent) and returns it. */
export function decodeRange(
  payload: Uint8Array,
  start: number,
  count: number,
  out?: Uint16Array,
  options?: DecodeOptions,
): Uint16Array {
  const meta = readPayloadMeta(payload);
  if (!Number.isInteger(start) || !Number.isInteger(count) || start < 0 || count < 0 || start + count > meta.elementCount) {
    throw new SplitZipError('INVALID_ARGUMENT', `range [${start}, ${start}+${count}) is outside 0..${meta.elementCount}`, {
      start,
      count,
      elementCount: meta.elementCount,
    });
  }
  const target = checkOutput(out, count);
  checkOutputApart(payload, meta.compBytes, target, count);
  if (options?.verify !== false) verifyPayloadChecksum(payload, meta);
  decodeValueRange(payload, meta, start, start + count, target, 0);
  return target;
}

/** For the decoders whose `out` is required (decodeChunks, decodeSegments), then as checkOutput. */
export function requireOutput(out: Uint16Array, count: number): Uint16Array {
  // Omitted, the values would go to a throwaway array and the call return nothing.
  if (!(out instanceof Uint16Array)) {
    throw new SplitZipError('INVALID_ARGUMENT', 'out must be a Uint16Array (required)', { argument: 'out' });
  }
  return checkOutput(out, count);
}

export function checkOutput(out: Uint16Array | undefined, count: number): Uint16Array {
  if (out === undefined) return new Uint16Array(count);
  if (!(out instanceof Uint16Array)) {
    throw new SplitZipError('INVALID_ARGUMENT', 'out must be a Uint16Array', {});
  }
  if (out.length < count) {
    throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${out.length} values, ${count} needed`, {
      outLength: out.length,
      needed: count,
    });
  }
  return out;
}

/** INVALID_ARGUMENT when out's first `count` values share bytes with the payload's `compBytes`. */
export function checkOutputApart(payload: Uint8Array, compBytes: number, out: Uint16Array, count: number): void {
  checkNoOverlap(payload, compBytes, out, 2 * count, 'out overlaps the payload');
}
