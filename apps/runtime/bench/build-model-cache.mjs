// Builds (or completes) the SplitZip cache of a model for the benchmarks and the default-model
// script, with the builder's library (@splitzip/builder buildCache): the project's one build path.
import { buildCache } from '@splitzip/builder';

export async function buildModelCache(modelPath, cacheDir) {
  const started = performance.now();
  const report = await buildCache({ model: modelPath, cacheDir });
  return { by: '@splitzip/builder buildCache', encoded: report.encoded, cached: report.cached, seconds: (performance.now() - started) / 1e3 };
}
