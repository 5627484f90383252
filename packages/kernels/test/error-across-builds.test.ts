// A loader that imports this package while a CommonJS dependency requires it holds two copies of
// KernelsError; each must recognise the other's errors.
import { expectErrorClassAcrossBuilds } from '@splitzip/test-support/error-across-builds';
import { describe, it } from 'vitest';

describe('KernelsError across the ESM and CommonJS builds', () => {
  it('instanceof and isKernelsError hold both ways; look-alikes are not KernelsErrors', async () => {
    await expectErrorClassAcrossBuilds(new URL('../', import.meta.url), 'KernelsError', 'isKernelsError', (ErrorType) => new (ErrorType as unknown as new (code: string, message: string) => Error)('DISPOSED', 'disposed'));
  });
});
