import { createEslintConfig } from '@splitzip/eslint-config';

// bench/ holds a Node script: it prints and uses Node globals.
const nodeGlobals = { process: 'readonly', console: 'readonly', performance: 'readonly', URL: 'readonly', Buffer: 'readonly', TextDecoder: 'readonly' };

export default [...createEslintConfig(), { files: ['bench/**'], languageOptions: { globals: nodeGlobals }, rules: { 'no-console': 'off' } }];
