import { decodeValueRange } from './decode-core.js';
import { checkOutput, type DecodeOptions } from './decode-range.js';
import { readPayloadMeta } from './read-payload-meta.js';
import { verifyPayloadChecksum } from './verify-payload-checksum.js';

/** Decodes a whole payload into `out` (allocated if absent; may be longer) and returns it. */
export function decode(payload: Uint8Array, out?: Uint16Array, options?: DecodeOptions): Uint16Array {
  const meta = readPayloadMeta(payload);
  const target = checkOutput(out, meta.elementCount);
  if (options?.verify !== false) verifyPayloadChecksum(payload, meta);
  decodeValueRange(payload, meta, 0, meta.elementCount, target, 0);
  return target;
}
