// Truncation and bit-flip sweeps: every result is a SplitZipError or the exact original, never another
// exception (a wasm trap or RangeError would surface here), never a write outside `out`.
import { afterAll, describe, expect, it } from 'vitest';
import { createCodebook, decode, decodeRange, encode, setCodecBackend, SplitZipError } from '../src/index.js';
import { BACKENDS, useBackend } from './backends.js';
import { createRandom, gaussianBf16, valuesWithExponents } from './reference.js';

const GUARD = 0x5a5a;

interface Fixture {
  name: string;
  values: Uint16Array;
  payload: Uint8Array;
}

function fixtures(): Fixture[] {
  const escapes = valuesWithExponents(201, [120, 121, 122, 9, 250], 1);
  const gaussian = gaussianBf16(1000, 0.02, 2);
  for (let i = 0; i < gaussian.length; i += 50) gaussian[i] = 0x7f80 | (i & 0x7f);
  return [
    { name: '201 values, chunk 64, escapes', values: escapes, payload: encode(escapes, createCodebook([120, 121, 122]), { chunkSize: 64 }) },
    { name: 'empty tensor', values: new Uint16Array(0), payload: encode(new Uint16Array(0), createCodebook([0])) },
    {
      name: '1000 Gaussian values with outliers',
      values: gaussian,
      payload: encode(gaussian, createCodebook(Array.from({ length: 16 }, (_, k) => 110 + k))),
    },
  ];
}

/** Decodes into a guarded out; returns 'error' for a SplitZipError, else the decoded values. */
function guardedDecode(payload: Uint8Array, n: number, verify: boolean, range?: [number, number]): Uint16Array | 'error' {
  const count = range ? range[1] : n;
  const big = new Uint16Array(count + 64).fill(GUARD);
  const out = big.subarray(32, 32 + count);
  let failed = false;
  try {
    if (range) decodeRange(payload, range[0], range[1], out, { verify });
    else decode(payload, out, { verify });
  } catch (error) {
    if (!(error instanceof SplitZipError)) throw error;
    failed = true;
  }
  for (let i = 0; i < 32; i++) {
    if (big[i] !== GUARD || big[big.length - 1 - i] !== GUARD) throw new Error('decode wrote outside out');
  }
  return failed ? 'error' : out.slice();
}

function equal(a: Uint16Array, b: Uint16Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

afterAll(() => setCodecBackend('auto'));

describe.each(BACKENDS)('corruption sweeps on the %s backend', (backend) => {
  for (const fixture of fixtures()) {
    it(`every truncation of ${fixture.name} is a SplitZipError`, () => {
      useBackend(backend);
      for (let cut = 0; cut < fixture.payload.length; cut++) {
        const short = fixture.payload.slice(0, cut);
        expect(guardedDecode(short, fixture.values.length, true)).toBe('error');
        expect(guardedDecode(short, fixture.values.length, false)).toBe('error');
      }
      expect(equal(guardedDecode(fixture.payload, fixture.values.length, true) as Uint16Array, fixture.values)).toBe(true);
    });

    it(`random bit flips in ${fixture.name}: verified decode always errors, unverified never misbehaves`, () => {
      useBackend(backend);
      const rand = createRandom(1234 + fixture.values.length);
      const n = fixture.values.length;
      let errors = 0;
      let unverifiedErrors = 0;
      let changed = 0;
      const flips = 3000;
      for (let t = 0; t < flips; t++) {
        const bad = fixture.payload.slice();
        const bits = 1 + Math.floor(rand() * 3);
        for (let k = 0; k < bits; k++) {
          // half of the flips land in the header, where every field is checked
          const at = rand() < 0.5 ? Math.floor(rand() * 256) : Math.floor(rand() * bad.length);
          bad[at]! ^= 1 << Math.floor(rand() * 8);
        }
        if (bad.every((b, i) => b === fixture.payload[i])) continue; // flips that cancelled out
        changed++;
        const verified = guardedDecode(bad, n, true);
        if (verified === 'error') errors++;
        else throw new Error(`a changed payload passed the checksum (flip ${t})`);
        // verify: false may return wrong values only where the format cannot tell (sm bits,
        // escape exponents, codes that stay valid); it must still never throw anything else.
        const unverified = guardedDecode(bad, n, false);
        if (unverified === 'error') unverifiedErrors++;
        if (n > 0) {
          const start = Math.floor(rand() * n);
          const count = Math.floor(rand() * (n - start + 1));
          guardedDecode(bad, n, false, [start, count]);
        }
      }
      expect(changed).toBeGreaterThan(flips * 0.9);
      expect(errors).toBe(changed);
      // header flips are caught without the checksum too
      expect(unverifiedErrors).toBeGreaterThan(changed * 0.3);
    });
  }
});
