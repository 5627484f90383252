import { createEslintConfig } from '@splitzip/eslint-config';

const nodeGlobals = {
  console: 'readonly',
  process: 'readonly',
  Buffer: 'readonly',
  URL: 'readonly',
  performance: 'readonly',
};

export default [
  ...createEslintConfig(),
  // Node scripts (benchmark, wasm assembler, demo) run outside the library.
  { files: ['bench/**/*.mjs', 'scripts/**/*.mjs', 'examples/**/*.mjs'], languageOptions: { globals: nodeGlobals } },
];
