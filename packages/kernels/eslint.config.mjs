import { createEslintConfig } from '@splitzip/eslint-config';

const browserGlobals = { window: 'readonly', document: 'readonly', navigator: 'readonly', self: 'readonly', performance: 'readonly' };
const nodeGlobals = {
  process: 'readonly',
  URL: 'readonly',
  setTimeout: 'readonly',
  clearTimeout: 'readonly',
  console: 'readonly',
  performance: 'readonly',
  SharedArrayBuffer: 'readonly',
};

export default [
  ...createEslintConfig(),
  // The test page runs in Chromium; the harness, bench and device scripts are plain Node ESM.
  { files: ['test/browser/page.js'], languageOptions: { globals: browserGlobals } },
  { files: ['**/*.mjs'], languageOptions: { globals: { ...nodeGlobals, window: 'readonly' } } },
];
