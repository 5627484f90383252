// A shard stamp that cannot be read while the model is open (an fstat failing ESTALE or EIO on
// network storage, which safetensors reports as no stamp) is no MODEL_CLOSED: the read then says
// what it finds. Only a model whose descriptors are gone is closed.
import type * as Safetensors from '@splitzip/safetensors';
import { expect, it, vi } from 'vitest';

vi.mock('@splitzip/safetensors', async (importOriginal) => ({
  ...(await importOriginal<typeof Safetensors>()),
  readShardStamp: () => null,
}));

const { loadTensor } = await import('../src/load-tensor.js');
const { openCachedModel, sameBytes } = await import('./fixtures.js');

it('an open model whose stamp read fails is served (not MODEL_CLOSED); a closed one is MODEL_CLOSED', async () => {
  const fixture = await openCachedModel('stamp-read-failure');
  try {
    const name = fixture.model.tensors[0]!.name;
    const loaded = await loadTensor({ model: fixture.model, name }, { cache: fixture.cache });
    expect(sameBytes(loaded.data, fixture.raw.get(name)!)).toBe(true);
    await fixture.model.close();
    await expect(loadTensor({ model: fixture.model, name }, { cache: fixture.cache })).rejects.toMatchObject({ code: 'MODEL_CLOSED' });
  } finally {
    await fixture.close();
  }
});
