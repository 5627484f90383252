import { createEslintConfig } from '@splitzip/eslint-config';

export default createEslintConfig();
