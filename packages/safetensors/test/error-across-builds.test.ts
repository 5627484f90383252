// A loader that imports this package while a CommonJS dependency requires it holds two copies of
// SafetensorsError; each must recognise the other's errors.
import { expectErrorClassAcrossBuilds } from '@splitzip/test-support/error-across-builds';
import { describe, it } from 'vitest';

describe('SafetensorsError across the ESM and CommonJS builds', () => {
  it('instanceof and isSafetensorsError hold both ways; look-alikes are not SafetensorsErrors', async () => {
    await expectErrorClassAcrossBuilds(new URL('../', import.meta.url), 'SafetensorsError', 'isSafetensorsError', (ErrorType) => new (ErrorType as unknown as new (code: string, message: string) => Error)('HEADER_TOO_LARGE', 'header too large'));
  });
});
