import { createVitestConfig } from '@splitzip/vitest-config';

export default createVitestConfig();
