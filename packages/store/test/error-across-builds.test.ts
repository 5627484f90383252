// A loader that imports this package while a CommonJS dependency requires it holds two copies of
// StoreError; each must recognise the other's errors.
import { expectErrorClassAcrossBuilds } from '@splitzip/test-support/error-across-builds';
import { describe, it } from 'vitest';

describe('StoreError across the ESM and CommonJS builds', () => {
  it('instanceof and isStoreError hold both ways; look-alikes are not StoreErrors', async () => {
    await expectErrorClassAcrossBuilds(new URL('../', import.meta.url), 'StoreError', 'isStoreError', (ErrorType) => new (ErrorType as unknown as new (code: string, message: string) => Error)('BLOB_MISSING', 'no blob'));
  });
});
