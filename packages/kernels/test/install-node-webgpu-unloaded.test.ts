// The user probe (item 8): after Dawn failed to load, a later installNodeWebGpu(flags) answered
// INVALID_ARGUMENT "Dawn is already installed with flags []": no Dawn was made, so no flags were
// applied, and the answer is the install's own status (webgpu unavailable, and why).
import { afterAll, describe, expect, it, vi } from 'vitest';
import { installNodeWebGpu } from '../src/install-node-webgpu.js';

// Dawn's native binary that does not load (a glibc too old): the import itself throws.
vi.mock('webgpu', () => {
  throw new Error('GLIBC_2.38 not found');
});

const hadNavigator = Object.getOwnPropertyDescriptor(globalThis, 'navigator');
afterAll(() => {
  if (hadNavigator) Object.defineProperty(globalThis, 'navigator', hadNavigator);
  else delete (globalThis as { navigator?: unknown }).navigator;
});

describe('installNodeWebGpu after Dawn failed to load', () => {
  it('other flags later answer the {available: false, reason} status, not INVALID_ARGUMENT', async () => {
    Object.defineProperty(globalThis, 'navigator', { value: undefined, configurable: true, writable: true });
    const installing = installNodeWebGpu();
    // Asked while the first install still loads: answered once it settled.
    const early = installNodeWebGpu(['x']);
    const first = await installing;
    expect(first).toMatchObject({ available: false, fallbackAdapter: false });
    expect(first.reason).toMatch(/^the webgpu package \(Dawn\) did not load: /);
    await expect(early).resolves.toEqual(first);
    await expect(installNodeWebGpu(['enable-dawn-features=allow_unsafe_apis'])).resolves.toEqual(first);
    // Arguments are still checked first.
    await expect(installNodeWebGpu('x' as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument: 'flags' } });
  });
});
