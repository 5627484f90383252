// A page without cross-origin isolation has no global SharedArrayBuffer: option checks must be
// typed errors there, not a ReferenceError from `instanceof SharedArrayBuffer`.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createKernels } from '../src/node.js';

describe('a page without cross-origin isolation (no global SharedArrayBuffer)', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });
  it('createKernels({ webgpu: { arena } }) is INVALID_ARGUMENT, not a ReferenceError', async () => {
    const arena = { buffer: new ArrayBuffer(64), threads: 1 };
    vi.stubGlobal('SharedArrayBuffer', undefined);
    await expect(createKernels({ backend: 'codec', webgpu: { arena } as never })).rejects.toMatchObject({
      name: 'KernelsError',
      code: 'INVALID_ARGUMENT',
    });
  });
});
