import { createEslintConfig } from '@splitzip/eslint-config';

// The CLI writes to the streams it is handed (never console), so the house rule stays on.
export default createEslintConfig();
