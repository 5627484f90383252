// Older caches hold format-version-2 payloads (no checksum segments). This rebuilds one from a
// version-3 payload of the same values (FORMAT.md "Version 2": codes one XXH32 stream, sm its even
// and odd 16-byte stripes): only the version field and the checksum differ, as in the codec's
// bench ("resealed as format v2").
import { readPayloadMeta, xxh32 } from '@splitzip/codec';

export function resealAsVersion2(v3: Uint8Array): Uint8Array {
  const p = v3.slice();
  const dv = new DataView(p.buffer);
  dv.setUint16(4, 2, true);
  const { layout } = readPayloadMeta(v3);
  const header = p.slice(0, 256);
  header.fill(0, 252, 256);
  const stripes = (from: number, to: number, parity: number): Uint8Array => {
    const out = new Uint8Array((to - from) / 2);
    for (let q = from + 16 * parity, o = 0; q < to; q += 32, o += 16) out.set(p.subarray(q, q + 16), o);
    return out;
  };
  const { codes, sm, escapeIndex, escapePositions, escapeExponents } = layout;
  const digests = [
    xxh32(header),
    xxh32(p.subarray(codes.offsetBytes, sm.offsetBytes)),
    xxh32(stripes(sm.offsetBytes, escapeIndex.offsetBytes, 0)),
    xxh32(stripes(sm.offsetBytes, escapeIndex.offsetBytes, 1)),
    xxh32(p.subarray(escapeIndex.offsetBytes, escapePositions.offsetBytes)),
    xxh32(p.subarray(escapePositions.offsetBytes, escapeExponents.offsetBytes)),
    xxh32(p.subarray(escapeExponents.offsetBytes, layout.totalBytes)),
  ];
  dv.setUint32(252, xxh32(new Uint8Array(Uint32Array.from(digests).buffer)), true);
  return p;
}
