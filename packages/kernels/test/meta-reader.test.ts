import { calibrateCodebook, encode, isSplitZipError, readPayloadMeta } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createMetaReader } from '../src/create-meta-reader.js';
import { modelLikeValues } from './fixtures.js';

function codeOf(run: () => unknown): string | null {
  try {
    run();
    return null;
  } catch (error) {
    return isSplitZipError(error) ? error.code : 'not a SplitZipError';
  }
}

describe('createMetaReader (a worker reads each job header through it)', () => {
  const values = modelLikeValues(10_001);
  const { codebook } = calibrateCodebook(values);
  const payload = encode(values, codebook);
  const other = encode(modelLikeValues(20_003, 5), codebook, { chunkSize: 128 });

  it('gives the same meta as readPayloadMeta, and the same object again for the same header bytes and length', () => {
    const read = createMetaReader();
    const first = read(payload);
    expect(first).toEqual(readPayloadMeta(payload));
    // Another copy of the same bytes: the meta is a function of the header and the length only.
    expect(read(payload.slice())).toBe(first);
  });

  it('reads a different header in full, and again when the first comes back', () => {
    const read = createMetaReader();
    const first = read(payload);
    const second = read(other);
    expect(second).toEqual(readPayloadMeta(other));
    expect(second.elementCount).toBe(20_003);
    const again = read(payload);
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
  });

  it('does not pass a header that changed since it was read (any byte), nor a shorter payload', () => {
    const read = createMetaReader();
    read(payload);
    const badMagic = payload.slice();
    badMagic[0] = 0x58;
    expect(codeOf(() => read(badMagic))).toBe('BAD_MAGIC');
    read(payload);
    const badReserved = payload.slice();
    badReserved[144] = 1;
    expect(codeOf(() => read(badReserved))).toBe('BAD_HEADER');
    const first = read(payload);
    // The last header byte (the stored checksum's top byte): the compare covers the whole header.
    const otherChecksum = payload.slice();
    otherChecksum[255]! ^= 1;
    const meta = read(otherChecksum);
    expect(meta).not.toBe(first);
    expect(meta.checksum).toBe(readPayloadMeta(otherChecksum).checksum);
    expect(meta.checksum).not.toBe(first.checksum);
    read(payload);
    expect(codeOf(() => read(payload.subarray(0, payload.length - 1)))).toBe('TRUNCATED');
    expect(codeOf(() => read(payload.subarray(0, 10)))).toBe('TRUNCATED');
  });
});
