// `stats` totals: the entropy bound is over the tensors the prediction covers, so the two compare.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { analyzeModel } from '../src/analyze-model.js';
import { renderStatsReport } from '../src/commands/stats.js';
import { formatBytes } from '../src/format-units.js';
import { createTempDir, escapeHeavyBf16, float32Tensor, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-stats-totals-');
});
afterAll(async () => temp?.cleanup());

describe('stats totals', () => {
  it('bound the entropy over the encodable tensors, as predicted: a skipped tensor of high entropy put the bound above the prediction', async () => {
    // The skipped tensor (coverage ~1/16, ~8 bits of exponent entropy) is larger than the encoded one.
    const model = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [
      gaussianBf16('encoded', [4096], 1),
      escapeHeavyBf16('skipped', [16384], 2),
      float32Tensor('f32', [64], 3),
    ]);
    const report = await analyzeModel(model, { coverageMin: 0.99, chunkSize: 1024 });
    const [encoded, skipped] = report.tensors;
    expect(encoded!.encodable).toBe(true);
    expect(skipped!.encodable).toBe(false);
    expect(skipped!.entropyBits!).toBeGreaterThan(6);
    const t = report.totals;
    expect(t.entropyBoundBytes).toBe(Math.ceil((encoded!.elementCount! * (8 + encoded!.entropyBits!)) / 8));
    // A bound, below what the codec is predicted to write for the same tensors.
    expect(t.entropyBoundBytes).toBeLessThanOrEqual(t.predictedBytes);
    // Lines past 120 columns go on under their value (10 columns in).
    expect(renderStatsReport(report).replace(/\n {10}/g, ' ')).toContain(`entropy bound ${formatBytes(t.entropyBoundBytes)} for the ${formatBytes(t.encodableBytes)} encoded (predicted ${formatBytes(t.predictedBytes)})`);
  });
});
