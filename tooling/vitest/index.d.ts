import type { UserConfig } from 'vitest/config';

/** Shared vitest settings (JSON report for the CI summary, one fork worker, long timeouts). */
export function createVitestConfig(overrides?: UserConfig): UserConfig;
