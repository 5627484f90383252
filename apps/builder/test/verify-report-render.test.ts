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

  it('lists 80,000 tensors not cached, stacked under long names (a large MoE model below the gate)', () => {
    // Each stacked row is two lines or more: lines.push(...160,000 lines) threw a RangeError (call stack).
    const long = `model.layers.0.mlp.experts.0.${'very_long_projection_name.'.repeat(4)}weight`;
    const tensors = Array.from({ length: 80_000 }, (_, i) => ({
      name: i === 0 ? long : `t${i}`,
      dtype: 'BF16',
      shard: 'm.safetensors',
      offsetBytes: 0,
      sizeBytes: 2,
      key: null,
      status: 'not_cached' as const,
      reason: 'Top-16 coverage 0.9 < 0.99',
    }));
    const text = renderVerifyReport({
      cache: 'c',
      ok: true,
      leftovers: null,
      store: { ok: true, checked: 0, passed: 0, decoded: 0, bytesRead: 0, generation: 0, durationMs: 1, problems: [] },
      model: { model: 'm', ok: true, coverageMin: 0.99, tensors, totals: { tensors: 80_000, ok: 0, not_cached: 80_000, failed: 0, checked_bytes: 0 } },
    });
    const lines = text.split('\n');
    // The long name folded after a `.` (its pieces 8 columns in), the others whole.
    expect(lines).toContain(`    model.layers.0.mlp.experts.0.${'very_long_projection_name.'.repeat(3)}`);
    expect(lines).toContain('        very_long_projection_name.weight');
    expect(lines).toContain('    t79999');
    expect(lines.at(-2)).toBe('OK');
  });
});
