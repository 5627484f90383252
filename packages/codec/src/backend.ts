// Kernel selection: the fast paths (WebAssembly SIMD, tuned JS) behind one internal interface.
import { SplitZipError } from './errors.js';
import { jsKernels } from './js/js-kernels.js';
import { createWasmKernels } from './wasm/wasm-kernels.js';

export type CodecBackendName = 'wasm-simd' | 'js';

/** Per-codebook lookup tables, built once per codebook by `prepareCodebookTables`. */
export interface CodebookTables {
  /** exponent -> code, or 16 when the exponent is not in the codebook (an escape). */
  readonly codeOfExponent: Uint8Array;
  /** code -> exponent << 7 (the exponent's bits in place in a BF16 pattern); 0 past the codebook. */
  readonly exponentBitsOfCode: Uint16Array;
  readonly size: number;
  readonly exponents: readonly number[];
}

export interface CodecKernels {
  readonly name: CodecBackendName;
  /**
   * Writes values [from, to) reconstructed from codes and sm (escapes not applied) to
   * out[outOffset + (i - from)]. Returns false if a code >= codebook size was seen.
   * The caller has checked every offset against the payload and out lengths.
   */
  decodeValues(
    payload: Uint8Array,
    codesOffset: number,
    smOffset: number,
    from: number,
    to: number,
    out: Uint16Array,
    outOffset: number,
    tables: CodebookTables,
  ): boolean;
  /** Number of values whose exponent is not in the codebook. */
  countEscapes(values: Uint16Array, tables: CodebookTables): number;
  /**
   * Fills the codes, sm, escape index, escape position and escape exponent sections of `payload`
   * (sized by the layout for `offsets.escapeCount`; header written by the caller). Returns the
   * number of escapes found; it writes at most `offsets.escapeCount` of them, so a wrong count
   * never writes past its section (the caller then re-encodes). With `withChecksum`, a kernel may
   * also return the payload checksum computed in the same pass (null if it does not).
   */
  encodeSections(
    values: Uint16Array,
    tables: CodebookTables,
    payload: Uint8Array,
    offsets: EncodeOffsets,
    withChecksum: boolean,
  ): { escapes: number; checksum: number | null };
  /** XXH32 of payload[0, totalBytes) with the checksum field as zero; absent: the JS one is used. */
  checksum?(payload: Uint8Array, totalBytes: number): number;
  /**
   * Decodes values [0, n) (escapes not applied) into out[0, n) and computes the payload checksum in
   * the same pass. Absent: the caller verifies first, then decodes.
   */
  decodeAllWithChecksum?(
    payload: Uint8Array,
    layout: DecodeLayout,
    elementCount: number,
    out: Uint16Array,
    tables: CodebookTables,
  ): { checksum: number; codesValid: boolean };
}

export interface DecodeLayout {
  codesOffset: number;
  smOffset: number;
  totalBytes: number;
}

export interface EncodeOffsets {
  codes: number;
  sm: number;
  escapeIndex: number;
  escapePositions: number;
  escapeExponents: number;
  chunkSize: number;
  escapeCount: number;
}

let forced: CodecBackendName | null = null;
let wasmKernels: CodecKernels | null | undefined;

/** The wasm kernels, instantiated on first use; null where WebAssembly SIMD is unavailable. */
function loadWasmKernels(): CodecKernels | null {
  if (wasmKernels === undefined) wasmKernels = createWasmKernels();
  return wasmKernels;
}

export function activeKernels(): CodecKernels {
  if (forced === 'js') return jsKernels;
  return loadWasmKernels() ?? jsKernels;
}

/** Which fast path encode/decode use on this platform: 'wasm-simd' where WebAssembly SIMD exists, else 'js'. */
export function getCodecBackend(): CodecBackendName {
  return activeKernels().name;
}

/**
 * For tests and benchmarks: force the JS path ('js'), or go back to automatic choice ('auto').
 * Forcing 'wasm-simd' where it is unavailable throws INVALID_ARGUMENT.
 */
export function setCodecBackend(backend: CodecBackendName | 'auto'): void {
  if (backend === 'auto') forced = null;
  else if (backend === 'js') forced = 'js';
  else if (backend === 'wasm-simd') {
    if (loadWasmKernels() === null) {
      throw new SplitZipError('INVALID_ARGUMENT', 'WebAssembly SIMD is not available on this platform', { backend });
    }
    forced = null;
  } else {
    throw new SplitZipError('INVALID_ARGUMENT', `unknown codec backend ${String(backend)}`, { backend });
  }
}

export function prepareCodebookTables(exponents: readonly number[]): CodebookTables {
  const codeOfExponent = new Uint8Array(256).fill(16);
  const exponentBitsOfCode = new Uint16Array(16);
  for (let k = 0; k < exponents.length; k++) {
    codeOfExponent[exponents[k]!] = k;
    exponentBitsOfCode[k] = exponents[k]! << 7;
  }
  return { codeOfExponent, exponentBitsOfCode, size: exponents.length, exponents };
}
