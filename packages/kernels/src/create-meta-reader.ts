import { HEADER_BYTES, readPayloadMeta, type PayloadMeta } from '@splitzip/codec';

/**
 * A readPayloadMeta that remembers the last header it accepted: a payload whose first
 * HEADER_BYTES bytes and length equal the last one's gets the same meta object without the
 * header being parsed and validated again. The meta is a function of exactly those bytes and the
 * length (FORMAT.md reader rules 1-6), so the answer is the same; a worker reads the header of
 * every job, and most jobs of a loader repeat a few shapes. Anything else is read in full.
 */
export function createMetaReader(): (payload: Uint8Array) => PayloadMeta {
  const header = new Uint8Array(HEADER_BYTES);
  let length = -1;
  let meta: PayloadMeta | null = null;
  return (payload) => {
    if (meta !== null && payload instanceof Uint8Array && payload.length === length && hasHeader(payload, header)) return meta;
    const read = readPayloadMeta(payload);
    header.set(payload.subarray(0, HEADER_BYTES));
    length = payload.length;
    meta = read;
    return meta;
  };
}

function hasHeader(payload: Uint8Array, header: Uint8Array): boolean {
  for (let i = 0; i < HEADER_BYTES; i++) if (payload[i] !== header[i]) return false;
  return true;
}
