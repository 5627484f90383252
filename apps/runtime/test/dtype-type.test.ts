// A loader maps each tensor's dtype to its device format: LoadedTensor, TensorReport and
// DeviceTensor give it as the safetensors union, so that a switch over it is checked exhaustive
// (it was `string`, and `const d: SafetensorsDtype = t.dtype` did not compile). The type checks
// here are `pnpm typecheck`'s (tsc includes test/); the values are checked as the test runs.
import { afterAll, beforeAll, expect, expectTypeOf, it } from 'vitest';
import { SAFETENSORS_DTYPES, type SafetensorsDtype } from '@splitzip/safetensors';
import type { DeviceTensor } from '../src/load-tensor-to-device.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import type { LoadedTensor, TensorReport } from '../src/types.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('dtype-type');
});
afterAll(async () => {
  await fixture.close();
});

it('dtype is a SafetensorsDtype on every tensor and report', async () => {
  expectTypeOf<LoadedTensor['dtype']>().toEqualTypeOf<SafetensorsDtype>();
  expectTypeOf<TensorReport['dtype']>().toEqualTypeOf<SafetensorsDtype>();
  expectTypeOf<DeviceTensor['dtype']>().toEqualTypeOf<SafetensorsDtype>();
  const seen = new Set<SafetensorsDtype>();
  for await (const tensor of loadModel(fixture.model, fixture.cache)) {
    const dtype: SafetensorsDtype = tensor.dtype;
    seen.add(dtype);
    expect(tensor.report.dtype).toBe(dtype);
  }
  // Served from the cache by a bare slice (no model): the entry's dtype.
  const slice = fixture.model.getTensor('embed.weight')!.slice;
  const bare: SafetensorsDtype = (await loadTensor(slice, { cache: fixture.cache })).dtype;
  seen.add(bare);
  expect([...seen].sort()).toEqual(['BF16', 'F32', 'I64']);
  expect([...seen].every((dtype) => (SAFETENSORS_DTYPES as readonly string[]).includes(dtype))).toBe(true);
});
