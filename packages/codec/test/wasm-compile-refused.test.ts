// A page whose Content Security Policy lacks 'wasm-unsafe-eval' validates WebAssembly but refuses to
// compile it. The codec falls back to JS there; forcing 'wasm-simd' must say that compilation was
// refused (and why), not that SIMD is missing. The engine is stubbed as such a page makes it, and
// the codec's modules are loaded afresh under the stub (they cache the compiled module).
import { afterEach, describe, expect, it, vi } from 'vitest';

const REFUSALS: [string, () => Error][] = [
  [
    'a CompileError (Chromium)',
    () =>
      new WebAssembly.CompileError(
        "WebAssembly.Module(): Refused to compile or instantiate WebAssembly module because 'wasm-unsafe-eval' is not an allowed source of script in the following Content Security Policy directive: \"script-src 'self'\"",
      ),
  ],
  ['an EvalError', () => new EvalError('Refused to compile or instantiate WebAssembly module')],
];

/** The real WebAssembly namespace, but compiling a module throws what `refusal` makes. */
function refusingWebAssembly(refusal: () => Error): typeof WebAssembly {
  const stub = Object.create(WebAssembly) as typeof WebAssembly;
  Object.defineProperty(stub, 'Module', {
    value: function Module(): never {
      throw refusal();
    },
  });
  return stub;
}

describe('WebAssembly compilation refused (a CSP without wasm-unsafe-eval)', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.resetModules();
  });
  it.each(REFUSALS)('with %s: the JS backend runs, and forcing wasm-simd names the refusal', async (_, refusal) => {
    vi.resetModules();
    vi.stubGlobal('WebAssembly', refusingWebAssembly(refusal));
    const codec = await import('../src/index.js');
    expect(codec.getCodecBackend()).toBe('js');
    const values = new Uint16Array([0x3f80, 0xc000, 0x0001]);
    const { codebook } = codec.calibrateCodebook(values);
    expect([...codec.decode(codec.encode(values, codebook))]).toEqual([...values]);
    let caught: unknown;
    try {
      codec.setCodecBackend('wasm-simd');
    } catch (error) {
      caught = error;
    }
    expect(codec.isSplitZipError(caught, 'INVALID_ARGUMENT')).toBe(true);
    const { message, details } = caught as InstanceType<typeof codec.SplitZipError>;
    expect(message).toContain('WebAssembly compilation was refused');
    expect(message).toContain(refusal().message);
    expect(message).toContain("'wasm-unsafe-eval'");
    expect(message).not.toContain('SIMD is not available');
    expect(details.cause).toBe(`${refusal().name}: ${refusal().message}`);
  });
  it('without SIMD (validate refuses the probe) it still says SIMD is not available', async () => {
    vi.resetModules();
    const stub = Object.create(WebAssembly) as typeof WebAssembly;
    Object.defineProperty(stub, 'validate', { value: () => false });
    vi.stubGlobal('WebAssembly', stub);
    const codec = await import('../src/index.js');
    expect(() => codec.setCodecBackend('wasm-simd')).toThrow(/WebAssembly SIMD is not available on this platform/);
  });
});
