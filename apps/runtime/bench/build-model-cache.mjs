// Builds (or completes) the SplitZip cache of a model for the benchmark and the default-model
// script. It uses the builder's library (@splitzip/builder buildCache: worker threads, the
// project's build). Only if that package is not built does it fall back to a plain sequential
// build with the store and codec (calibrate → gate → encode → commit with slice keys).
import { createHash } from 'node:crypto';
import { calibrateCodebook, createCodebook, encode } from '@splitzip/codec';
import { openSafetensorsModel, readTensorBytes } from '@splitzip/safetensors';
import { computeContentKey, openCacheStore } from '@splitzip/store';

const COVERAGE_MIN = 0.99;

export async function buildModelCache(modelPath, cacheDir) {
  let builder;
  try {
    builder = await import('@splitzip/builder');
  } catch {
    builder = undefined;
  }
  const started = performance.now();
  if (builder?.buildCache) {
    const report = await builder.buildCache({ model: modelPath, cacheDir });
    return { by: '@splitzip/builder buildCache', encoded: report.encoded, cached: report.cached, seconds: (performance.now() - started) / 1e3 };
  }
  const model = await openSafetensorsModel(modelPath);
  const store = await openCacheStore(cacheDir, { create: true, coverageMin: COVERAGE_MIN });
  let encoded = 0;
  let cached = 0;
  try {
    for (const tensor of model.tensors) {
      if (tensor.dtype !== 'BF16') continue;
      const bytes = await readTensorBytes(model, tensor);
      const key = computeContentKey(bytes, tensor.shape, 'BF16');
      if (store.getEntry(key) !== undefined) {
        await store.aliasSlices([{ key, ...tensor.slice }]);
        cached += 1;
        continue;
      }
      const values = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
      const { codebook, coverage } = values.length > 0 ? calibrateCodebook(values) : { codebook: createCodebook([127]), coverage: 1 };
      if (coverage < COVERAGE_MIN) continue;
      const payload = encode(values, codebook);
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      await store.addEntries([{ key, qualname: tensor.name, payload, shape: tensor.shape, dtype: 'BF16', sha256, sliceKeys: [[tensor.slice.shardName, tensor.slice.offsetBytes, tensor.slice.sizeBytes]] }]);
      encoded += 1;
    }
  } finally {
    await store.close();
    await model.close();
  }
  return { by: 'store + codec (sequential fallback)', encoded, cached, seconds: (performance.now() - started) / 1e3 };
}
