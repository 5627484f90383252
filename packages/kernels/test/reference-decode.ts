// The oracle for these tests: a plain scalar decoder written from FORMAT.md, sharing no code
// with src/ or the codec. No validation: only fed payloads the codec produced.

export function referenceDecode(payload: Uint8Array): Uint16Array {
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const chunkSize = dv.getUint32(12, true);
  const n = Number(dv.getBigUint64(16, true));
  const chunkCount = dv.getUint32(32, true);
  const codebookSize = payload[36]!;
  const codebook: number[] = [];
  for (let k = 0; k < codebookSize; k++) codebook.push(payload[40 + k]!);
  const codesAt = Number(dv.getBigUint64(56, true));
  const smAt = Number(dv.getBigUint64(72, true));
  const indexAt = Number(dv.getBigUint64(88, true));
  const posAt = Number(dv.getBigUint64(104, true));
  const expAt = Number(dv.getBigUint64(120, true));
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const byte = payload[codesAt + Math.floor(i / 2)]!;
    const code = i % 2 === 0 ? byte & 15 : byte >> 4;
    const sm = payload[smAt + i]!;
    out[i] = ((sm & 0x80) << 8) | (codebook[code]! << 7) | (sm & 0x7f);
  }
  for (let c = 0; c < chunkCount; c++) {
    const first = dv.getUint32(indexAt + 4 * c, true);
    const end = dv.getUint32(indexAt + 4 * (c + 1), true);
    for (let j = first; j < end; j++) {
      const i = c * chunkSize + dv.getUint16(posAt + 2 * j, true);
      const exponent = payload[expAt + j]!;
      out[i] = (out[i]! & 0x807f) | (exponent << 7);
    }
  }
  return out;
}

/** Index of the first difference, or -1. */
export function firstMismatch(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}
