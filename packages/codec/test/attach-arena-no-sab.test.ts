// A page without cross-origin isolation has no global SharedArrayBuffer: the arena checks must be
// typed errors there, not a ReferenceError from `instanceof SharedArrayBuffer`.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { attachCodecArena } from '../src/index.js';

describe('attachCodecArena without a global SharedArrayBuffer', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });
  it('a plain buffer share is INVALID_ARGUMENT', () => {
    vi.stubGlobal('SharedArrayBuffer', undefined);
    expect(() => attachCodecArena({ buffer: new ArrayBuffer(64) } as never)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
  it('a non-shared memory share is INVALID_ARGUMENT', () => {
    vi.stubGlobal('SharedArrayBuffer', undefined);
    const memory = new WebAssembly.Memory({ initial: 1 });
    expect(() => attachCodecArena({ memory, scratchBase: 65536 } as never)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});
