// A loader imports only @splitzip/runtime (README: pnpm's strict node_modules does not let it import
// @splitzip/safetensors without depending on it), yet maps each tensor's dtype (SafetensorsDtype
// since 2026-12-07) to its device format and passes models, infos and slices around: those types
// are re-exported so it can name them. The type checks are `pnpm typecheck`'s (tsc includes test/).
import { expect, expectTypeOf, it } from 'vitest';
import { SAFETENSORS_DTYPES } from '@splitzip/safetensors';
import type { LoadedTensor, SafetensorsDtype, SafetensorsModel, SliceKey, TensorInfo } from '../src/index.js';

it('SafetensorsDtype, SafetensorsModel, TensorInfo and SliceKey are nameable from the runtime', () => {
  expectTypeOf<SafetensorsDtype>().toEqualTypeOf<LoadedTensor['dtype']>();
  expectTypeOf<TensorInfo['slice']>().toEqualTypeOf<SliceKey>();
  expectTypeOf<SafetensorsModel['tensors'][number]>().toEqualTypeOf<TensorInfo>();
  // A loader's map to its device formats, checked complete by the compiler.
  const bytesPerElement: Record<SafetensorsDtype, number> = {
    BOOL: 1, U8: 1, I8: 1, F8_E5M2: 1, F8_E4M3: 1, F8_E8M0: 1, F8_E4M3FNUZ: 1, F8_E5M2FNUZ: 1,
    I16: 2, U16: 2, F16: 2, BF16: 2, I32: 4, U32: 4, F32: 4, F64: 8, I64: 8, U64: 8, C64: 8,
    F4: 0.5, F6_E2M3: 0.75, F6_E3M2: 0.75,
  };
  expect(Object.keys(bytesPerElement).sort()).toEqual([...SAFETENSORS_DTYPES].sort());
});
