import { HEADER_OFFSET, READABLE_FORMAT_VERSIONS } from './constants.js';
import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';
import { computePayloadChecksum } from './payload-checksum.js';
import { writeU32 } from './payload-header.js';
import { readPayloadMeta } from './read-payload-meta.js';
import { verifyPayloadChecksum } from './verify-payload-checksum.js';

/**
 * The same payload in another readable format version (FORMAT.md's version rule: versions 1-3 lay
 * out every section alike and differ only in how the checksum hashes the codes and sm sections).
 * Returns a copy with the version field set and the checksum recomputed. The payload's own
 * checksum is verified first, so a damaged payload is never resealed into a valid one. For caches
 * that runtimes reading only an older version must load, and for comparing versions.
 */
export function convertPayloadVersion(payload: Uint8Array, version: number): Uint8Array {
  if (!READABLE_FORMAT_VERSIONS.includes(version)) {
    const versions = READABLE_FORMAT_VERSIONS.join(', ');
    // A string '2' is not the version 2: said so, not "cannot convert to format version 2".
    const message = typeof version === 'number' ? `cannot convert to format version ${version} (only ${versions})` : `version must be the number ${versions.replace(/, (\d+)$/, ' or $1')}, got ${describeValue(version)}`;
    throw new SplitZipError('INVALID_ARGUMENT', message, { version });
  }
  const meta = readPayloadMeta(payload);
  verifyPayloadChecksum(payload, meta);
  // A copy (a Buffer's `slice` is a view: the writes below would change the caller's payload).
  const out = new Uint8Array(payload.subarray(0, meta.compBytes));
  out[HEADER_OFFSET.version] = version & 0xff;
  out[HEADER_OFFSET.version + 1] = version >>> 8;
  writeU32(out, HEADER_OFFSET.checksum, computePayloadChecksum(out, meta.layout, version));
  return out;
}
