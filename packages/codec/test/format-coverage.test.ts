// formatCoverage rounds down, exactly: the printed decimal, read back, is never above the value,
// and is the largest such decimal (a value just under a gate never prints as the gate).
import { describe, expect, it } from 'vitest';
import { formatCoverage } from '../src/internal.js';
import { createRandom } from './reference.js';

describe('formatCoverage', () => {
  it('prints a value just under the gate below it, and exact decimals as themselves', () => {
    expect(formatCoverage(0.98999977, 6)).toBe('0.989999');
    expect(formatCoverage(0.98999977, 4)).toBe('0.9899');
    expect(formatCoverage(0.99, 6)).toBe('0.990000');
    expect(formatCoverage(1, 3)).toBe('1.000');
    expect(formatCoverage(0, 2)).toBe('0.00');
    expect(formatCoverage(0.1 + 0.2, 2)).toBe('0.30');
    // value * 10^digits rounds below an integer the value reaches (0.29 * 100 = 28.999…) and above
    // one it does not reach (the double just under 0.281, times 1000, rounds to 281).
    expect(formatCoverage(0.29, 2)).toBe('0.29');
    expect(formatCoverage(0.28099999999999997, 3)).toBe('0.280');
  });

  it('gives the largest decimal of that many digits not above the value, on random coverages', () => {
    const rng = createRandom(11);
    for (let round = 0; round < 20000; round++) {
      const digits = 1 + Math.floor(rng() * 6);
      // Coverages are counts over counts: k / n.
      const n = 1 + Math.floor(rng() * 1e7);
      const value = Math.floor(rng() * (n + 1)) / n;
      const text = formatCoverage(value, digits);
      const step = 10 ** -digits;
      expect(Number(text) <= value, `${value} at ${digits}: ${text}`).toBe(true);
      // The next decimal up is above it: none larger would do.
      expect(Number((Number(text) + step).toFixed(digits)) > value, `${value} at ${digits}: ${text}`).toBe(true);
    }
  });
});
