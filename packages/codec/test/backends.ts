import { setCodecBackend, type CodecBackendName } from '../src/index.js';

/** Both fast paths; every round-trip suite runs once per backend. */
export const BACKENDS: CodecBackendName[] = ['wasm-simd', 'js'];

export function useBackend(backend: CodecBackendName): void {
  setCodecBackend(backend === 'js' ? 'js' : 'wasm-simd');
}
