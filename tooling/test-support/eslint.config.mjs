import { createEslintConfig } from '@splitzip/eslint-config';

// Everything here is test code: describeS3 tells the developer why S3 tests were skipped.
export default createEslintConfig({ allowConsole: true });
