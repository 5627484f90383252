// A loader that imports this package while a CommonJS dependency requires it holds two copies of
// RuntimeError; each must recognise the other's errors.
import { expectErrorClassAcrossBuilds } from '@splitzip/test-support/error-across-builds';
import { describe, it } from 'vitest';

describe('RuntimeError across the ESM and CommonJS builds', () => {
  it('instanceof and isRuntimeError hold both ways; look-alikes are not RuntimeErrors', async () => {
    await expectErrorClassAcrossBuilds(new URL('../', import.meta.url), 'RuntimeError', 'isRuntimeError', (ErrorType) => new (ErrorType as unknown as new (code: string, message: string) => Error)('CACHE_CLOSED', 'closed'));
  });
});

describe('ReadError (createFileReader) across the ESM and CommonJS builds', () => {
  it('instanceof and isReadError hold both ways; look-alikes are not ReadErrors', async () => {
    await expectErrorClassAcrossBuilds(new URL('../', import.meta.url), 'ReadError', 'isReadError', (ErrorType) => new (ErrorType as unknown as new (code: string, message: string, path: string) => Error)('UNEXPECTED_EOF', 'ended', '/x'));
  });
});
