import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CODEC_WASM_BASE64 } from '../src/wasm/codec-wasm.generated.js';
import { isWasmSimdSupported } from '../src/wasm/wasm-kernels.js';

describe('embedded WebAssembly module', () => {
  it('is current with wasm/codec.wat (re-assembled with wabt)', () => {
    const script = fileURLToPath(new URL('../scripts/build-wasm.mjs', import.meta.url));
    expect(() => execFileSync(process.execPath, [script, '--check'], { stdio: 'pipe' })).not.toThrow();
  });

  it('stays under 4 KiB so browsers may compile it synchronously on the main thread', () => {
    const bytes = Buffer.from(CODEC_WASM_BASE64, 'base64');
    expect(bytes.length).toBeLessThan(4096);
    expect(WebAssembly.validate(bytes)).toBe(true);
  });

  it('detects SIMD by validating a probe module', () => {
    expect(isWasmSimdSupported()).toBe(true);
  });
});
