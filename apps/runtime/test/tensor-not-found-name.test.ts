// TENSOR_NOT_FOUND shows the name asked for, bounded: a caller's 1 MB string (a tensor's bytes
// decoded as text, a file's contents passed by mistake) made a message of 1 MB, where a real
// name, however long (TF-style paths of 200 characters), is shown whole so a typo can be seen.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('tensor-not-found-name');
});
afterAll(async () => {
  await fixture.close();
});

type Thrown = Error & { code: string; details: Record<string, unknown> };
const notFound = (name: string): Promise<Thrown> =>
  loadTensor({ model: fixture.model, name }, { cache: fixture.cache }).then(
    () => expect.fail(`${name.slice(0, 20)}… loaded`),
    (error: unknown) => error as Thrown,
  );

it('a huge name: the message is cut and says how long the name was, details.tensor keeps it whole', async () => {
  const name = `${'q'.repeat(1_000_000)}.weight`;
  const error = await notFound(name);
  expect(error).toMatchObject({ code: 'TENSOR_NOT_FOUND' });
  expect(error.message.length).toBeLessThan(1_000);
  expect(error.message).toContain('qqqq');
  expect(error.message).toContain('(1000007 characters)');
  expect(error.details.tensor).toBe(name);
});

it('a long real-looking name is shown whole', async () => {
  const name = `module_apply_default/Encoder_en/KonaTransformer/Encode/TransformerStack/Layer_1/TransformerLayer/FFN/conv2/Tensordot/${'x'.repeat(120)}/Reshape_1`;
  const error = await notFound(name);
  expect(error).toMatchObject({ code: 'TENSOR_NOT_FOUND' });
  expect(error.message).toContain(`has no tensor named ${name}`);
});
