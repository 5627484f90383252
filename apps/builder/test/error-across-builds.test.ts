// A loader that imports this package while a CommonJS dependency requires it holds two copies of
// BuilderError; each must recognise the other's errors.
import { expectErrorClassAcrossBuilds } from '@splitzip/test-support/error-across-builds';
import { describe, it } from 'vitest';

describe('BuilderError across the ESM and CommonJS builds', () => {
  it('instanceof and isBuilderError hold both ways; look-alikes are not BuilderErrors', async () => {
    await expectErrorClassAcrossBuilds(new URL('../', import.meta.url), 'BuilderError', 'isBuilderError', (ErrorType) => new (ErrorType as unknown as new (code: string, message: string) => Error)('USAGE', 'bad option'));
  });
});
