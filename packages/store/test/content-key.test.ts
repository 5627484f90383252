import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { computeContentKey, dtypeToTorchText, formatContentKeyPrefix, formatPythonShape } from '../src/index.js';

const bf16 = (patterns: number[]) => new Uint8Array(new Uint16Array(patterns).buffer);
const SIX = bf16([0x3f80, 0xc000, 0x3f00, 0x0000, 0x7fc0, 0x7f80]);

// Expected keys were computed with Python's hashlib and str(tuple(shape)), as the seed does.
describe('computeContentKey', () => {
  it('matches the issue vector: shape (2, 3), six BF16 patterns', () => {
    expect(computeContentKey(SIX, [2, 3], 'BF16')).toBe('ba663ec446e5e55438e4c6af922dc05fe49ea3d7');
    expect(computeContentKey(SIX, [2, 3], 'torch.bfloat16')).toBe('ba663ec446e5e55438e4c6af922dc05fe49ea3d7');
  });

  it('formats shapes exactly as Python str(tuple(shape))', () => {
    expect(formatPythonShape([])).toBe('()');
    expect(formatPythonShape([4096])).toBe('(4096,)');
    expect(formatPythonShape([4096, 4096])).toBe('(4096, 4096)');
    expect(formatPythonShape([1, 2, 3, 4])).toBe('(1, 2, 3, 4)');
    expect(formatPythonShape([2 ** 40, 0, 3])).toBe('(1099511627776, 0, 3)');
  });

  it('matches Python for 0-d, 1-d, 3-d, empty and big-dimension shapes', () => {
    expect(computeContentKey(bf16([0x3f80]), [], 'BF16')).toBe('09b38a877c3abe945a7437c4118f026572fd27da');
    expect(computeContentKey(SIX, [6], 'BF16')).toBe('74e892b7355879aad9796ae29097857fcb6ff01b');
    expect(computeContentKey(SIX, [1, 2, 3], 'BF16')).toBe('444985cc32eafae4bf9477c31e2ec7f79a7f9804');
    expect(computeContentKey(new Uint8Array(0), [0, 4096], 'BF16')).toBe('a72cfd1742b0b07f89d24d059bb7df2206b0448e');
    expect(computeContentKey(new Uint8Array(0), [151936, 0], 'BF16')).toBe('3d6a0365a3b8185d14d30a7b8b91fc2b0e08427b');
    expect(computeContentKey(new Uint8Array(0), [2 ** 40, 0, 3], 'BF16')).toBe('3800407228f10fc559c11f3db6f533b32962fc29');
    // Empty, though the dimensions before the zero multiply past 2^53 (they failed whole builds and loads).
    expect(computeContentKey(new Uint8Array(0), [2 ** 27, 2 ** 27, 0], 'BF16')).toBe('962badf12a75f3a72ca76d427bef0ff0c0b2e33b');
    expect(computeContentKey(new Uint8Array(0), [...new Array<number>(63).fill(2 ** 53 - 1), 0], 'BF16')).toBe('56ccdfe31651e1b4f5ebff2d78d6113021a7d44f');
  });

  it('matches Python on a 4 MiB tensor (4096, 512)', () => {
    const values = new Uint16Array(4096 * 512);
    for (let i = 0; i < values.length; i++) values[i] = Math.imul(i, 40503) & 0xffff;
    expect(computeContentKey(new Uint8Array(values.buffer), [4096, 512], 'BF16')).toBe('12e50450f21b589b2355cb506c6844db197c33f7');
  });

  it('uses the torch dtype text of other dtypes', () => {
    expect(computeContentKey(new Uint8Array(new Float32Array([1, -2, 0.5]).buffer), [3], 'F32')).toBe('78fa706d4e48cee7b77c043067a8558997cb5c92');
    expect(computeContentKey(new Uint8Array([1, 2, 3, 255]), [4], 'U8')).toBe('b126267bc8bcd5ac30c2ebcba352ab0f08aedef6');
    expect(computeContentKey(new Uint8Array([1, 2, 3, 255]), [4], 'torch.uint8')).toBe('b126267bc8bcd5ac30c2ebcba352ab0f08aedef6');
    expect(dtypeToTorchText('F16')).toBe('torch.float16');
    expect(dtypeToTorchText('F8_E4M3')).toBe('torch.float8_e4m3fn');
    expect(dtypeToTorchText('I64')).toBe('torch.int64');
  });

  it('hashes a view, not its whole buffer', () => {
    const big = new Uint8Array(100);
    big.set(SIX, 10);
    expect(computeContentKey(big.subarray(10, 22), [2, 3], 'BF16')).toBe('ba663ec446e5e55438e4c6af922dc05fe49ea3d7');
  });

  it('rejects unknown dtypes, wrong byte lengths and bad shapes', () => {
    expect(() => computeContentKey(SIX, [2, 3], 'F4')).toThrow(expect.objectContaining({ code: 'UNKNOWN_DTYPE' }));
    expect(() => computeContentKey(SIX, [2, 3], 'torch.nonsense')).toThrow(expect.objectContaining({ code: 'UNKNOWN_DTYPE' }));
    expect(() => computeContentKey(SIX, [2, 3], 'F4')).toThrow(expect.objectContaining({ message: expect.not.stringContaining('did you mean') }));
  });

  it("a dtype of another case names the one meant ('bf16' → 'BF16'; it said only that it had no torch dtype text)", () => {
    for (const [given, meant] of [
      ['bf16', 'BF16'],
      ['f8_e4m3', 'F8_E4M3'],
      ['Torch.BFloat16', 'torch.bfloat16'],
    ]) {
      expect(() => computeContentKey(SIX, [2, 3], given!)).toThrow(
        expect.objectContaining({ code: 'UNKNOWN_DTYPE', message: expect.stringContaining(`did you mean "${meant}"?`), details: expect.objectContaining({ suggestion: meant }) }),
      );
    }
    expect(() => computeContentKey(SIX, [2, 2], 'BF16')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => computeContentKey(SIX, [3, 2], 'F32')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => computeContentKey(SIX, [-2, -3], 'BF16')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => computeContentKey(SIX, [2.5, 2.4], 'BF16')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => computeContentKey(SIX, new Array(65).fill(1), 'BF16')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => computeContentKey(SIX, [2 ** 30, 2 ** 30], 'BF16')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => computeContentKey('abc' as unknown as Uint8Array, [3], 'U8')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  it('formatContentKeyPrefix: what the key hashes before the bytes (SHA-1 over it then the bytes is the key), with the same checks', () => {
    expect(formatContentKeyPrefix([2, 3], 'BF16', 12)).toBe('(2, 3)torch.bfloat1612');
    expect(createHash('sha1').update(formatContentKeyPrefix([2, 3], 'BF16', 12)).update(SIX).digest('hex')).toBe('ba663ec446e5e55438e4c6af922dc05fe49ea3d7');
    expect(formatContentKeyPrefix([7], 'U8', 7)).toBe('(7,)torch.uint87');
    expect(() => formatContentKeyPrefix([2, 2], 'BF16', 12)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => formatContentKeyPrefix([2, 3], 'F4', 12)).toThrow(expect.objectContaining({ code: 'UNKNOWN_DTYPE' }));
    expect(() => formatContentKeyPrefix([2 ** 30, 2 ** 30], 'BF16', 12)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});
