// Options a loader misspells, or an object passed where the options go: each is INVALID_ARGUMENT
// naming the key (and the likely intended one). They were ignored: `verfyDigest: true` loaded
// unverified, `loadTensor(request, cache)` loaded raw with reason 'missing', and `verifyDigest:
// 'false'` turned verification on.
import { expect, it } from 'vitest';
import { createFileReader } from '../src/create-file-reader.js';
import { createPacedReader } from '../src/create-paced-reader.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { RuntimeError } from '../src/errors.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import { openModel } from '../src/open-model.js';
import { openShardCache, wrapCacheStore } from '../src/open-shard-cache.js';
import { openCachedModel, sameBytes } from './fixtures.js';

async function errorOf(run: () => unknown, what = 'the call'): Promise<RuntimeError> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(RuntimeError);
    return error as RuntimeError;
  }
  throw new Error(`expected a RuntimeError from ${what}, got a result`);
}

it('a misspelt option is INVALID_ARGUMENT naming it and the option it was likely meant to be', async () => {
  const fixture = await openCachedModel('unknown-options');
  try {
    const { model, cache } = fixture;
    const name = model.tensors[0]!.name;
    const cases: [() => unknown, string, string | undefined][] = [
      [() => loadModel(model, cache, { verfyDigest: true } as never), 'verfyDigest', 'verifyDigest'],
      [() => loadModel(model, cache, { cacheonly: true } as never), 'cacheonly', 'cacheOnly'],
      [() => loadModel(model, cache, { concurency: 2 } as never), 'concurency', 'concurrency'],
      [() => loadTensor({ model, name }, { cache, verifyDigst: true } as never), 'verifyDigst', 'verifyDigest'],
      [() => openShardCache(fixture.dir + '/cache', { fileSource: 'trust' } as never), 'fileSource', 'fileSources'],
      [() => wrapCacheStore(cache.store, { coverage: 0.5 } as never), 'coverage', undefined],
      [() => cache.createStagingPool({ slotcount: 2 } as never), 'slotcount', 'slotCount'],
      [() => createStagingPool({ slotBytes: 64, slotCount: 1, sharedd: true } as never), 'sharedd', 'shared'],
      [() => createThreadDecoder({ thread: 2 } as never), 'thread', 'threads'],
      [() => createFileReader({ syncReadMaxByte: 0 } as never), 'syncReadMaxByte', 'syncReadMaxBytes'],
      [() => createPacedReader(createFileReader(), { bytesPerSecond: 1e9, burst: 0 } as never), 'burst', undefined],
      [() => openModel(fixture.dir + '/model', { readThrough: '/tmp' } as never), 'readThrough', undefined],
      // loadTensor's options less backend (the kernels decode), plus kernels.
      [() => loadTensorToDevice({ model, name }, { cache, kernels: { decodeToDevice: () => undefined }, backend: 'cpu' } as never), 'backend', undefined],
    ];
    for (const [run, key, near] of cases) {
      const error = await errorOf(run);
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.details).toMatchObject({ option: key });
      expect(error.message).toContain(JSON.stringify(key));
      if (near !== undefined) expect(error.message).toContain(`did you mean ${JSON.stringify(near)}`);
    }
    // The cache handle where the options go says so.
    const handleError = await errorOf(() => loadTensor({ model, name }, cache as never));
    expect(handleError.code).toBe('INVALID_ARGUMENT');
    expect(handleError.message).toContain('cache handle');
    // A reader is readExact alone (the README's ByteReader; a load never closes it).
    const files = createFileReader();
    const readExactOnly = { readExact: (path: string, target: Uint8Array, at: number) => files.readExact(path, target, at) };
    const viaReader = await loadTensor({ model, name }, { reader: readExactOnly as never });
    expect(sameBytes(viaReader.data, fixture.raw.get(name)!)).toBe(true);
    await createPacedReader(readExactOnly as never, { bytesPerSecond: 1e9 }).close();
    await files.close();
    // Every documented option still passes, given as undefined too.
    const loaded = await loadTensor({ model, name }, { cache, verifyDigest: true, cacheOnly: undefined, explainMisses: false });
    expect(sameBytes(loaded.data, fixture.raw.get(name)!)).toBe(true);
  } finally {
    await fixture.close();
  }
});

it("boolean flags must be booleans ('false' is true to an if), and a reader must be a ByteReader", async () => {
  const fixture = await openCachedModel('boolean-options');
  try {
    const { model, cache } = fixture;
    const name = model.tensors[0]!.name;
    for (const [run, option] of [
      [() => loadModel(model, cache, { verifyDigest: 'false' } as never), 'verifyDigest'],
      [() => loadModel(model, cache, { refresh: 'no' } as never), 'refresh'],
      [() => loadTensor({ model, name }, { cache, cacheOnly: 1 } as never), 'cacheOnly'],
      [() => loadModel(model, cache, { reader: {} } as never), 'reader'],
      [() => loadTensor({ model, name }, { cache, reader: { readExact: 1 } } as never), 'reader'],
      [() => createPacedReader(undefined as never, { bytesPerSecond: 1e9 }), 'inner'],
      [() => cache.createStagingPool({ shared: 'yes' } as never), 'shared'],
    ] as const) {
      const error = await errorOf(run, option);
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.details).toMatchObject({ option });
    }
  } finally {
    await fixture.close();
  }
});

it("loadModel's options passed second, where the cache goes (loadModel(model, { cache })): INVALID_ARGUMENT saying to pass them third", async () => {
  const fixture = await openCachedModel('options-as-cache');
  try {
    for (const options of [{ cache: fixture.cache }, { concurrency: 4 }, { verifyDigest: true, backend: 'cpu' }]) {
      const error = await errorOf(() => loadModel(fixture.model, options as never));
      expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'cache' } });
      expect(error.message).toContain("this looks like loadModel's options: pass them third, loadModel(model, cache, options), with null for the cache to load raw");
    }
    // An object that holds no option of loadModel's: no such guess.
    expect((await errorOf(() => loadModel(fixture.model, { lookup: 1 } as never))).message).not.toContain('looks like');
  } finally {
    await fixture.close();
  }
});
