// Kernel selection: the fast paths (WebAssembly SIMD, tuned JS) behind one internal interface.
import type { PayloadLayout } from './compute-payload-layout.js';
import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';
import type { EscapeList } from './escape-list.js';
import { jsKernels } from './js/js-kernels.js';
import type { BulkDigests } from './payload-checksum.js';
import { createWasmKernels, wasmCompileRefusal } from './wasm/wasm-kernels.js';

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

/**
 * A decode kernel's report that every value below `endValue` (a payload value index) of its range
 * is written to out: the caller patches those values' escapes while they are still in cache
 * (on a tensor larger than the cache, patching after the whole decode costs a miss per escape).
 * Kernels call it in increasing order, or not at all: the caller finishes what they left.
 */
export type ValuesWritten = (endValue: number) => void;

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
    written?: ValuesWritten,
  ): boolean;
  /**
   * Adds the 256-bin exponent histogram of `values` to `histogram` (each bin mod 2^32, as a
   * Uint32Array store wraps). The caller has checked both arguments. Absent: the JS loop.
   */
  countExponents?(values: Uint16Array, histogram: Uint32Array): void;
  /** Number of values whose exponent is not in the codebook. */
  countEscapes(values: Uint16Array, tables: CodebookTables): number;
  /**
   * Writes the codes and sm spans of `payload` ([codes, codesEnd) and [sm, smEnd), padding zeroed)
   * and appends every escape (value index, exponent) to `escapes` in value order. With
   * `withDigests`, a kernel may also return the spans' digests as the current FORMAT_VERSION hashes
   * them, computed in the same pass (null if it does not). The caller has checked that payload holds both spans.
   */
  encodeSections(
    values: Uint16Array,
    tables: CodebookTables,
    payload: Uint8Array,
    at: EncodeOffsets,
    escapes: EscapeList,
    withDigests: boolean,
  ): BulkDigests | null;
  /** XXH32 digests of the codes and sm spans as format `version` hashes them; absent: the JS hash is used. */
  bulkDigests?(payload: Uint8Array, layout: PayloadLayout, version: number): BulkDigests;
  /**
   * Decodes values [0, n) (escapes not applied) into out[0, n) and computes the codes and sm
   * digests in the same pass. Absent: the caller verifies first, then decodes.
   */
  decodeAllWithDigests?(
    payload: Uint8Array,
    layout: PayloadLayout,
    elementCount: number,
    out: Uint16Array,
    tables: CodebookTables,
    version: number,
    written?: ValuesWritten,
  ): { digests: BulkDigests; codesValid: boolean };
  /** Format v3: the six digests of each segment in [first, end) into out[0 ..). Absent: the JS hash is used. */
  segmentDigests?(payload: Uint8Array, layout: PayloadLayout, first: number, end: number, out: Uint32Array): void;
  /**
   * Format v3: decodes the values of segments [first, end) (escapes not applied) into
   * out[outOffset ..) and writes their digests into digests[0 ..) in the same pass; returns false
   * if a code >= codebook size may have been seen. Absent: decode, then hash.
   */
  decodeSegmentsWithDigests?(
    payload: Uint8Array,
    layout: PayloadLayout,
    first: number,
    end: number,
    out: Uint16Array,
    outOffset: number,
    tables: CodebookTables,
    digests: Uint32Array,
    written?: ValuesWritten,
  ): boolean;
}

export interface EncodeOffsets {
  codes: number;
  /** End of the codes span (the sm offset). */
  codesEnd: number;
  sm: number;
  /** End of the sm span (the escape index offset). */
  smEnd: number;
}

let forced: CodecBackendName | null = null;
let wasmKernels: CodecKernels | null | undefined;

/** The wasm kernels, instantiated on first use; null where WebAssembly SIMD is unavailable. */
function loadWasmKernels(): CodecKernels | null {
  if (wasmKernels === undefined) wasmKernels = createWasmKernels(0)?.kernels ?? null;
  return wasmKernels;
}

export function activeKernels(): CodecKernels {
  if (forced === 'js') return jsKernels;
  return loadWasmKernels() ?? jsKernels;
}

/**
 * Kernels bound to each codec arena's WebAssembly memory, by that memory's buffer, with the bytes
 * [0, reservedBytes) where the kernels keep their tables, digest lanes and blocks (scratch areas).
 */
interface ArenaKernels {
  readonly kernels: CodecKernels;
  readonly reservedBytes: number;
}
const arenaKernels = new WeakMap<ArrayBufferLike, ArenaKernels>();

export function registerArenaKernels(buffer: ArrayBufferLike, kernels: CodecKernels, reservedBytes: number): void {
  arenaKernels.set(buffer, { kernels, reservedBytes });
}

/**
 * The arena kernels of view's buffer (undefined outside an arena). Throws INVALID_ARGUMENT for a
 * view that touches the arena's reserved bytes: the kernels would read it as their own scratch and
 * write their tables over it (wrong values, and decode tables cached wrong for later calls). O(1).
 */
export function checkArenaView(view: ArrayBufferView, name: string): CodecKernels | undefined {
  const arena = arenaKernels.get(view.buffer);
  if (arena === undefined) return undefined;
  if (view.byteOffset < arena.reservedBytes && view.byteLength > 0) {
    throw new SplitZipError('INVALID_ARGUMENT', `${name} overlaps the codec arena's reserved bytes [0, ${arena.reservedBytes}) (use views from arena.allocate)`, {
      argument: name,
      byteOffset: view.byteOffset,
      byteLength: view.byteLength,
      reservedBytes: arena.reservedBytes,
    });
  }
  return arena.kernels;
}

/**
 * The kernels for an operation on these views: an arena's own kernels when the first view (else
 * the second) lives in a codec arena, so they work on it in place; else the active kernels.
 * Either view touching an arena's reserved bytes is INVALID_ARGUMENT (named firstName/secondName).
 */
export function kernelsFor(first: ArrayBufferView, second?: ArrayBufferView, firstName = 'payload', secondName = 'out'): CodecKernels {
  const a = checkArenaView(first, firstName);
  const b = second === undefined ? undefined : checkArenaView(second, secondName);
  if (forced === 'js') return jsKernels;
  return a ?? b ?? activeKernels();
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
      const refusal = wasmCompileRefusal();
      if (refusal === undefined) throw new SplitZipError('INVALID_ARGUMENT', 'WebAssembly SIMD is not available on this platform', { backend });
      throw new SplitZipError(
        'INVALID_ARGUMENT',
        `WebAssembly compilation was refused (${refusal}); on a web page, a Content Security Policy whose script-src lacks 'wasm-unsafe-eval' does this`,
        { backend, cause: refusal },
      );
    }
    forced = null;
  } else {
    throw new SplitZipError('INVALID_ARGUMENT', `unknown codec backend ${describeValue(backend)} (one of 'wasm-simd', 'js', 'auto')`, { backend });
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
