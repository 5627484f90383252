import { setCodecBackend, type CodecBackendName } from '../src/index.js';

/** Both fast paths; every round-trip suite runs once per backend. */
export const BACKENDS: CodecBackendName[] = ['wasm-simd', 'js'];

export function useBackend(backend: CodecBackendName): void {
  setCodecBackend(backend === 'js' ? 'js' : 'wasm-simd');
}

/** The `code` of the error `fn` throws ('none' if it returns; 'not a SplitZipError' without a code). */
export function codeOf(fn: () => unknown): string {
  try {
    fn();
    return 'none';
  } catch (error) {
    return (error as { code?: string }).code ?? 'not a SplitZipError';
  }
}
