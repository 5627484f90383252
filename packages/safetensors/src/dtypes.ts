/** Every dtype of the safetensors format. */
export type SafetensorsDtype =
  | 'BOOL'
  | 'U8'
  | 'I8'
  | 'F8_E5M2'
  | 'F8_E4M3'
  | 'F8_E8M0'
  | 'F8_E4M3FNUZ'
  | 'F8_E5M2FNUZ'
  | 'I16'
  | 'U16'
  | 'F16'
  | 'BF16'
  | 'I32'
  | 'U32'
  | 'F32'
  | 'F64'
  | 'I64'
  | 'U64'
  | 'C64'
  | 'F4'
  | 'F6_E2M3'
  | 'F6_E3M2';

/** Bits per element. Sub-byte dtypes (F4, F6_*) need element count x bits to be a whole number of bytes. */
export const DTYPE_BITS: Readonly<Record<SafetensorsDtype, number>> = Object.freeze({
  BOOL: 8,
  U8: 8,
  I8: 8,
  F8_E5M2: 8,
  F8_E4M3: 8,
  F8_E8M0: 8,
  F8_E4M3FNUZ: 8,
  F8_E5M2FNUZ: 8,
  I16: 16,
  U16: 16,
  F16: 16,
  BF16: 16,
  I32: 32,
  U32: 32,
  F32: 32,
  F64: 64,
  I64: 64,
  U64: 64,
  C64: 64,
  F4: 4,
  F6_E2M3: 6,
  F6_E3M2: 6,
});

export const SAFETENSORS_DTYPES: readonly SafetensorsDtype[] = Object.freeze(
  Object.keys(DTYPE_BITS) as SafetensorsDtype[],
);

export function isSafetensorsDtype(value: unknown): value is SafetensorsDtype {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(DTYPE_BITS, value);
}
