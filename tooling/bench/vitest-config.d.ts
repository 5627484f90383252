// The shared vitest config package ships plain .mjs without types (tooling/vitest); declare what we use.
declare module '@splitzip/vitest-config' {
  import type { UserConfig } from 'vitest/config';
  export function createVitestConfig(overrides?: UserConfig): UserConfig;
}
