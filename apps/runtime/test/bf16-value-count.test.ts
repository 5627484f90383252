import { describe, expect, it } from 'vitest';
import { MAX_BUFFER_BYTES } from '@splitzip/safetensors';
import { bf16ValueCount } from '../src/bf16-value-count.js';

// Value counts of byte lengths at and past 2^32 (a 4 GiB tensor is Node 20's largest buffer):
// computed without allocating anything.
describe('bf16ValueCount', () => {
  it('counts the values of byte lengths at and beyond 32 bits', () => {
    expect(bf16ValueCount(0)).toBe(0);
    expect(bf16ValueCount(3)).toBe(1);
    expect(bf16ValueCount(2 ** 31)).toBe(2 ** 30);
    expect(bf16ValueCount(2 ** 32 - 2)).toBe(2 ** 31 - 1);
    expect(bf16ValueCount(2 ** 32)).toBe(2 ** 31); // `>>> 1` gave 0
    expect(bf16ValueCount(2 ** 32 + 2)).toBe(2 ** 31 + 1); // and 1 here
    expect(bf16ValueCount(2 ** 33 + 7)).toBe(2 ** 32 + 3);
    expect(bf16ValueCount(MAX_BUFFER_BYTES)).toBe(Math.floor(MAX_BUFFER_BYTES / 2));
  });
});
