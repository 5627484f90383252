import { createEslintConfig } from '@splitzip/eslint-config';

// bench/, bin/, examples/ and test helpers are plain Node ESM scripts: Node globals, and the
// scripts that are CLIs print (the library under src/ never does).
const nodeGlobals = {
  process: 'readonly',
  console: 'readonly',
  performance: 'readonly',
  URL: 'readonly',
  Buffer: 'readonly',
  setTimeout: 'readonly',
  clearTimeout: 'readonly',
  setImmediate: 'readonly',
  SharedArrayBuffer: 'readonly',
};

export default [
  ...createEslintConfig(),
  { files: ['**/*.mjs'], languageOptions: { globals: nodeGlobals } },
  { files: ['bin/**', 'bench/**', 'examples/**'], rules: { 'no-console': 'off' } },
];
