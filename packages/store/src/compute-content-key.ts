import { createHash } from 'node:crypto';
import { describeValue, detailValue } from './describe-value.js';
import { StoreError } from './errors.js';
import { updateHash } from './hash-bytes.js';
import { MAX_SHAPE_RANK } from './limits.js';

// safetensors dtype -> [str(torch.dtype), element width in bytes]. F4/F6 have no unpacked torch dtype.
const DTYPES: Readonly<Record<string, readonly [string, number]>> = Object.freeze({
  BF16: ['torch.bfloat16', 2],
  F16: ['torch.float16', 2],
  F32: ['torch.float32', 4],
  F64: ['torch.float64', 8],
  BOOL: ['torch.bool', 1],
  U8: ['torch.uint8', 1],
  I8: ['torch.int8', 1],
  I16: ['torch.int16', 2],
  U16: ['torch.uint16', 2],
  I32: ['torch.int32', 4],
  U32: ['torch.uint32', 4],
  I64: ['torch.int64', 8],
  U64: ['torch.uint64', 8],
  C64: ['torch.complex64', 8],
  F8_E4M3: ['torch.float8_e4m3fn', 1],
  F8_E5M2: ['torch.float8_e5m2', 1],
  F8_E4M3FNUZ: ['torch.float8_e4m3fnuz', 1],
  F8_E5M2FNUZ: ['torch.float8_e5m2fnuz', 1],
  F8_E8M0: ['torch.float8_e8m0fnu', 1],
});

const TORCH_WIDTHS: ReadonlyMap<string, number> = new Map(Object.values(DTYPES).map(([text, width]) => [text, width]));

/** `str(torch.dtype)` for a safetensors dtype (`BF16` → `torch.bfloat16`); a known `torch.*` text passes through. */
export function dtypeToTorchText(dtype: string): string {
  const known = DTYPES[dtype];
  if (known && Object.prototype.hasOwnProperty.call(DTYPES, dtype)) return known[0];
  if (TORCH_WIDTHS.has(dtype)) return dtype;
  // Another case of a known name (`bf16`, `Torch.BFloat16`): said, as a tensor name's did-you-mean is.
  const near = typeof dtype === 'string' ? findDtypeOfOtherCase(dtype) : undefined;
  const hint = near === undefined ? '' : `: did you mean ${JSON.stringify(near)}? (dtype names are case-sensitive)`;
  throw new StoreError('UNKNOWN_DTYPE', `dtype ${describeValue(dtype)} has no torch dtype text${hint}`, {
    details: { dtype: detailValue(dtype), ...(near === undefined ? {} : { suggestion: near }) },
  });
}

/** The safetensors or torch dtype name equal to `dtype` but for case, if any. */
function findDtypeOfOtherCase(dtype: string): string | undefined {
  const lower = dtype.toLowerCase();
  return [...Object.keys(DTYPES), ...TORCH_WIDTHS.keys()].find((name) => name.toLowerCase() === lower);
}

/** True for BF16 given either way (`BF16` or `torch.bfloat16`). */
export function isBf16Dtype(dtype: string): boolean {
  return dtype === 'BF16' || dtype === 'torch.bfloat16';
}

/** Validates a shape (safe non-negative integers, rank ≤ MAX_SHAPE_RANK) and returns its element count. */
export function countShapeElements(shape: readonly number[], context: { entry?: string } = {}): number {
  if (!Array.isArray(shape) || shape.length > MAX_SHAPE_RANK) {
    throw new StoreError('INVALID_ARGUMENT', `shape must be an array of at most ${MAX_SHAPE_RANK} dimensions`, {
      ...context,
      details: { rank: Array.isArray(shape) ? shape.length : undefined, limit: MAX_SHAPE_RANK },
    });
  }
  let count = 1;
  for (let d = 0; d < shape.length; d++) {
    const dim: unknown = shape[d];
    if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 0) {
      throw new StoreError('INVALID_ARGUMENT', `shape[${d}] must be a non-negative safe integer`, {
        ...context,
        details: { dimension: d, value: detailValue(dim) },
      });
    }
    count *= dim;
  }
  if (shape.includes(0)) return 0; // (the product alone may have passed Infinity, and Infinity × 0 is NaN)
  // Judged on the whole product: a zero dimension anywhere makes an empty tensor, however large the
  // product of the dimensions before it (a valid file; [2^27, 2^27, 0] failed whole builds and loads).
  // Otherwise, once the product leaves the exact range it can never describe real bytes.
  if (count > Number.MAX_SAFE_INTEGER) {
    throw new StoreError('INVALID_ARGUMENT', 'shape describes more elements than 2^53 - 1', {
      ...context,
      details: { shape: [...shape] },
    });
  }
  return count;
}

/** Python's `str(tuple(shape))`: `()`, `(4096,)`, `(2, 3)`. */
export function formatPythonShape(shape: readonly number[]): string {
  countShapeElements(shape);
  if (shape.length === 1) return `(${shape[0]},)`;
  return `(${shape.join(', ')})`;
}

/**
 * The seed's content key: SHA-1 over str(tuple(shape)), str(dtype), the decimal byte length, then the
 * raw bytes. The byte length must equal product(shape) × the dtype's width.
 */
export function computeContentKey(bytes: ArrayBufferView, shape: readonly number[], dtype: string): string {
  if (!ArrayBuffer.isView(bytes)) {
    throw new StoreError('INVALID_ARGUMENT', 'bytes must be a Uint8Array (or another ArrayBufferView)');
  }
  const hash = createHash('sha1').update(formatContentKeyPrefix(shape, dtype, bytes.byteLength), 'utf8');
  return updateHash(hash, bytes).digest('hex');
}

/**
 * What the content key hashes before the bytes (str(tuple(shape)), str(dtype), the decimal byte
 * length, as UTF-8), after the same checks as computeContentKey: SHA-1 over it then the bytes is
 * the key. For a thread that hashes the bytes where they are, given this text by the thread that
 * checked the tensor (the runtime's decode threads).
 */
export function formatContentKeyPrefix(shape: readonly number[], dtype: string, byteLength: number): string {
  const dtypeText = dtypeToTorchText(dtype);
  const width = TORCH_WIDTHS.get(dtypeText)!;
  const elementCount = countShapeElements(shape);
  if (elementCount * width !== byteLength) {
    throw new StoreError('INVALID_ARGUMENT', `${byteLength} bytes do not hold a ${dtypeText} tensor of shape ${formatPythonShape(shape)}`, {
      details: { byteLength, expectedBytes: elementCount * width, shape: [...shape], dtype },
    });
  }
  return `${formatPythonShape(shape)}${dtypeText}${byteLength}`;
}
