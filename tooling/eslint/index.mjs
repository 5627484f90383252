// Shared flat config: recommended JS + typescript-eslint rules, plus the house rules
// (libraries never print: console is an error outside CLIs, tests, benches and scripts).
import js from '@eslint/js';
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
      files: ['test/**', 'bench/**', 'scripts/**', 'examples/**'],
      rules: { 'no-console': 'off' },
    },
  );
}
