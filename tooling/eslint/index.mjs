// Shared flat config: recommended JS + typescript-eslint rules, plus the house rules
// (libraries never print: console is an error outside CLIs, tests, benches and scripts).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export function createEslintConfig({ allowConsole = false } = {}) {
  return tseslint.config(
    { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '**/*.generated.ts'] },
    js.configs.recommended,
    ...tseslint.configs.recommended,
    {
      rules: {
        'no-console': allowConsole ? 'off' : 'error',
        '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
        '@typescript-eslint/consistent-type-imports': 'error',
      },
    },
    {
      // Plain JS files are Node scripts (benches, CLIs, generators, device harnesses).
      files: ['**/*.mjs', '**/*.cjs', '**/*.js'],
      languageOptions: { globals: { ...globals.node } },
    },
    {
      files: ['test/**', 'bench/**', 'scripts/**', 'examples/**', 'bin/**', 'device/**'],
      languageOptions: { globals: { ...globals.node } },
      rules: { 'no-console': 'off' },
    },
  );
}
