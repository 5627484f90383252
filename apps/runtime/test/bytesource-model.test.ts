// The README says how to load a model over a ByteSource of your own: openModel takes locations only
// (`openModel({ source })` is INVALID_ARGUMENT), and @splitzip/safetensors' openSafetensorsModel({
// source }) opens it for loadModel. It said openModel was openSafetensorsModel plus s3:// models,
// which a user's probe took to accept `{ source }`. Pins the documented behaviour (no new API).
import { openSafetensorsModel } from '@splitzip/safetensors';
import { afterAll, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { openModel } from '../src/open-model.js';
import { objectSource, openCachedModel, sameBytes, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture | undefined;
afterAll(async () => fixture?.close());

it("openModel refuses a ByteSource; openSafetensorsModel({ source }) opens one for loadModel", async () => {
  fixture = await openCachedModel('bytesource-model');
  const source = await objectSource(`${fixture.dir}/model`, '"abc"');
  await expect(openModel({ source } as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('a model location is a path or an s3:// URL') });
  const model = await openSafetensorsModel({ source });
  try {
    let served = 0;
    for await (const t of loadModel(model, fixture.cache)) {
      expect(sameBytes(t.data, fixture.raw.get(t.name)!)).toBe(true);
      served += 1;
    }
    expect(served).toBe(fixture.raw.size);
  } finally {
    await model.close();
  }
});
