import { expect, it } from 'vitest';
import { getCodecBackend, encode, decode, calibrateCodebook, setCodecBackend } from '../src/index.js';
import { gaussianBf16, randomBf16, referenceEncode } from './reference.js';
it('wasm backend', () => {
  expect(getCodecBackend()).toBe('wasm-simd');
  for (const values of [gaussianBf16(100_001, 0.02, 1), randomBf16(70001, 2)]) {
    const { codebook } = calibrateCodebook(values);
    const ref = referenceEncode(values, codebook.exponents);
    const p = encode(values, codebook);
    expect(p).toEqual(ref);
    expect(decode(p)).toEqual(values);
    setCodecBackend('js');
    expect(decode(p)).toEqual(values);
    expect(encode(values, codebook)).toEqual(ref);
    setCodecBackend('auto');
  }
});
