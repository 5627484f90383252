import { checkMetaFitsPayload } from './decode-core.js';
import { SplitZipError } from './errors.js';
import { computePayloadChecksum } from './payload-checksum.js';
import { readPayloadMeta, type PayloadMeta } from './read-payload-meta.js';
import { kernelsFor } from './backend.js';

/** Throws CHECKSUM_MISMATCH unless the stored XXH32 matches the payload. Reads the header when `meta` is absent. */
export function verifyPayloadChecksum(payload: Uint8Array, meta?: PayloadMeta): void {
  const m = meta ?? readPayloadMeta(payload);
  if (meta !== undefined) checkMetaFitsPayload(payload, meta);
  const kernels = kernelsFor(payload);
  const actual = computePayloadChecksum(payload, m.layout, m.version, kernels.bulkDigests?.(payload, m.layout, m.version));
  if (actual !== m.checksum) {
    throw new SplitZipError('CHECKSUM_MISMATCH', 'payload checksum does not match its contents', {
      storedChecksum: m.checksum,
      computedChecksum: actual,
    });
  }
}
