// `allocate` that returns undefined for a tensor (a name missing from the caller's map of arena
// views) is INVALID_ARGUMENT naming the tensor, as null is: the runtime used a buffer of its own,
// and the caller's view stayed zero with no error.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import type { ShardCache } from '../src/open-shard-cache.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('allocate-result');
});
afterAll(async () => {
  await fixture.close();
});

it.each([
  ['from the cache', (): ShardCache | null => fixture.cache],
  ['raw', (): ShardCache | null => null],
] as const)('allocate returning undefined for one tensor, %s: INVALID_ARGUMENT naming it', async (_label, cacheOf) => {
  const [forgotten, ...rest] = fixture.model.tensors;
  const views = new Map(rest.map((t) => [t.name, new Uint8Array(t.slice.sizeBytes)]));
  const error = await loadModel(fixture.model, cacheOf(), { allocate: (t) => views.get(t.name)! })
    .drain()
    .catch((thrown: unknown) => thrown);
  expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'allocate', tensor: forgotten!.name, outputType: 'undefined' } });
  expect((error as Error).message).toContain(`allocate returned undefined for ${forgotten!.name}`);
  // null, as before: INVALID_ARGUMENT naming the tensor.
  const nullError = await loadModel(fixture.model, cacheOf(), { allocate: (t) => views.get(t.name) ?? (null as never) })
    .drain()
    .catch((thrown: unknown) => thrown);
  expect(nullError).toMatchObject({ code: 'INVALID_ARGUMENT', details: { tensor: forgotten!.name, outputType: 'null' } });
});

it('every tensor allocated: each lands in its view', async () => {
  const views = new Map(fixture.model.tensors.map((t) => [t.name, new Uint8Array(t.slice.sizeBytes)]));
  for await (const tensor of loadModel(fixture.model, fixture.cache, { allocate: (t) => views.get(t.name)! })) {
    expect(tensor.data.buffer).toBe(views.get(tensor.name)!.buffer);
  }
});
