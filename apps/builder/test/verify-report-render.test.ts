// verify's text report: a problem of the cache's layout (an S3 object below stamps/ or slices/ that
// no entry owns) names no entry; it was printed as "FAIL entry  ():".
import { describe, expect, it } from 'vitest';
import { renderVerifyReport } from '../src/commands/verify.js';

describe('renderVerifyReport', () => {
  it('names the entry of an entry problem, and the cache of a layout problem', () => {
    const text = renderVerifyReport({
      cache: 's3://b/c',
      ok: false,
      model: null,
      leftovers: null,
      store: {
        ok: false,
        checked: 1,
        passed: 0,
        decoded: 0,
        bytesRead: 0,
        generation: 0,
        durationMs: 1,
        problems: [
          { key: 'ab'.repeat(20), qualname: 'w', code: 'BLOB_MISSING', message: 'BLOB_MISSING: gone' },
          { key: '', qualname: '', code: 'ENTRY_INVALID', message: 'unrecognised object s3://b/c/stamps/x below stamps/' },
        ],
      },
    });
    expect(text).toContain(`  FAIL entry ${'ab'.repeat(20)} (w): BLOB_MISSING: gone`);
    expect(text).toContain('  FAIL cache: ENTRY_INVALID: unrecognised object s3://b/c/stamps/x below stamps/');
    expect(text).not.toContain('()');
  });
});
