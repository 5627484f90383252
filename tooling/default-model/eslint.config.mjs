import { createEslintConfig } from '@splitzip/eslint-config';

// bin/ holds Node CLIs: they print and use Node globals.
const nodeGlobals = { process: 'readonly', console: 'readonly', performance: 'readonly', URL: 'readonly', Buffer: 'readonly' };

export default [
  ...createEslintConfig(),
  { files: ['bin/**'], languageOptions: { globals: nodeGlobals }, rules: { 'no-console': 'off' } },
];
