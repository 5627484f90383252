// Shared vitest settings. Each package's vitest.config.ts calls createVitestConfig().
// The JSON reporter feeds scripts/summarize-tests.mjs, which prints the one
// "N passed, N failed" line CI reads (vitest's own summary is not read).
import { defineConfig } from 'vitest/config';

export function createVitestConfig(overrides = {}) {
  const { test = {}, ...rest } = overrides;
  return defineConfig({
    ...rest,
    test: {
      include: ['test/**/*.test.ts'],
      testTimeout: 60_000,
      hookTimeout: 120_000,
      // 2-core machines: one worker keeps multi-process and timing-sensitive tests stable.
      pool: 'forks',
      maxWorkers: 1,
      reporters: ['default', ['json', { outputFile: '.vitest-result.json' }]],
      ...test,
    },
  });
}
