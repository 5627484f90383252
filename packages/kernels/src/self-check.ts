import { createCodebook, encode as codecEncode, type Codebook } from '@splitzip/codec';

/**
 * The start-up known-answer test: a tiny tensor whose decode must give back exactly these
 * values. 331 values (odd, not a multiple of 2, 4 or the 64-value chunk), a 4-entry codebook (so
 * codes above 3 are invalid), and escapes at chunk starts and ends, back to back, and with the
 * exponents 0 and 255.
 */
export interface SelfCheckCase {
  values: Uint16Array;
  codebook: Codebook;
  chunkSize: number;
  payload: Uint8Array;
}

let cached: SelfCheckCase | null = null;

export function getSelfCheckCase(): SelfCheckCase {
  if (cached) return cached;
  const codebook = createCodebook([127, 126, 125, 128]);
  const values = new Uint16Array(331);
  let state = 0x2545f491;
  for (let i = 0; i < values.length; i++) {
    // xorshift32: a fixed pseudo-random sequence, the same on every platform.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    const r = state >>> 0;
    const exponent = codebook.exponents[r & 3]!;
    values[i] = (r & 0x8000) | (exponent << 7) | ((r >>> 8) & 0x7f);
  }
  const escapes: Array<[number, number]> = [
    [0, 0],
    [1, 255],
    [2, 130],
    [63, 1],
    [64, 200],
    [127, 124],
    [128, 0],
    [200, 254],
    [201, 3],
    [330, 129],
  ];
  for (const [i, exponent] of escapes) values[i] = (values[i]! & 0x807f) | (exponent << 7);
  const chunkSize = 64;
  cached = { values, codebook, chunkSize, payload: codecEncode(values, codebook, { chunkSize }) };
  return cached;
}
