// A loader that imports the codec while a CommonJS dependency requires it holds two copies of
// SplitZipError; each must recognise the other's errors. (The shared check in test-support
// depends on this package, so it is written out here.)
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import type * as Codec from '../src/index.js';

describe('SplitZipError across the ESM and CommonJS builds', () => {
  it('instanceof and isSplitZipError hold both ways; look-alikes are not SplitZipErrors', async () => {
    const esm = (await import(new URL('../dist/index.js', import.meta.url).href)) as typeof Codec;
    const cjs = createRequire(import.meta.url)('../dist/index.cjs') as typeof Codec;
    expect(esm.SplitZipError).not.toBe(cjs.SplitZipError);
    // Also with the global Error replaced after the package loaded (a polyfill such as core-js's
    // error-cause one, or zone.js, may do that): the class's own test must not hang on it.
    const OriginalError = globalThis.Error;
    for (const replaced of [false, true]) {
      if (replaced) globalThis.Error = class extends OriginalError {} as ErrorConstructor;
      try {
        for (const [from, to] of [[esm, cjs], [cjs, esm]] as const) {
          const error = new from.SplitZipError('TRUNCATED', 'payload ends early');
          expect(error instanceof to.SplitZipError, `global Error replaced: ${replaced}`).toBe(true);
          expect(to.isSplitZipError(error)).toBe(true);
          expect(to.isSplitZipError(error, 'TRUNCATED')).toBe(true);
          expect(to.isSplitZipError(error, 'OUTPUT_TOO_SMALL')).toBe(false);
        }
      } finally {
        globalThis.Error = OriginalError;
      }
    }
    // A user's subclass: its instances are its own, and still SplitZipErrors.
    class PayloadGone extends esm.SplitZipError {}
    const gone = new PayloadGone('TRUNCATED', 'x');
    expect([gone instanceof PayloadGone, gone instanceof esm.SplitZipError, gone instanceof cjs.SplitZipError]).toEqual([true, true, true]);
    expect(new esm.SplitZipError('TRUNCATED', 'x') instanceof PayloadGone).toBe(false);
    // The class keeps its name in both builds (console.log prints it).
    expect([esm.SplitZipError.name, cjs.SplitZipError.name]).toEqual(['SplitZipError', 'SplitZipError']);
    const lookAlike = Object.assign(new Error('TRUNCATED: payload ends early'), { name: 'SplitZipError', code: 'TRUNCATED' });
    for (const value of [lookAlike, { ...new esm.SplitZipError('TRUNCATED', 'x') }, null, undefined, 'x', 3]) {
      expect(value instanceof esm.SplitZipError).toBe(false);
      expect(esm.isSplitZipError(value)).toBe(false);
    }
  });
});
