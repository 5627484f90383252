// Builds (or completes) the SplitZip cache of a model for the benchmarks and the default-model
// script, with the builder's library (@splitzip/builder buildCache): the project's one build path.
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildCache } from '@splitzip/builder';

const REPO = resolve(fileURLToPath(new URL('../../..', import.meta.url)));

export async function buildModelCache(modelPath, cacheDir) {
  const started = performance.now();
  const report = await buildCache({ model: modelPath, cacheDir });
  return { by: '@splitzip/builder buildCache', encoded: report.encoded, cached: report.cached, seconds: (performance.now() - started) / 1e3 };
}

/**
 * The model and cache a measuring script was given (`modelDir`, `cacheDir`), or, when it was given
 * none, the built-in default model and its bench cache (built or completed first).
 */
export async function resolveBenchModel(modelDir, cacheDir) {
  if (modelDir !== undefined) return { modelDir, cacheDir };
  const { ensureDefaultModel } = await import('@splitzip/default-model');
  const defaultDir = await ensureDefaultModel();
  const defaultCache = join(REPO, '.cache', 'runtime-bench', 'cache-default');
  await buildModelCache(defaultDir, defaultCache);
  return { modelDir: defaultDir, cacheDir: defaultCache };
}
