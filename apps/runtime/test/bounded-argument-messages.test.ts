import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeValue } from '@splitzip/codec/internal';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openModel } from '../src/open-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

// Messages that show a caller's wrong value stay bounded whatever the value: a tensor's data passed
// as the request was listed key by key (one per element), and a boolean option's value was
// serialized whole (a cycle or a BigInt threw a TypeError instead of INVALID_ARGUMENT).
describe('bounded argument messages', () => {
  it('a typed array passed as the request is named by its class and length', async () => {
    const data = new Uint16Array(3_000_000);
    const error = await loadTensor(data as never, {}).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    const message = (error as Error).message;
    expect(message).toContain('got object [object Uint16Array] of length 3000000');
    expect(message.length).toBeLessThan(400);
  });

  it('a boolean option given a cyclic object, a BigInt or a Proxy whose get trap throws is INVALID_ARGUMENT with a short message', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const trapping = new Proxy(
      {},
      {
        get() {
          throw new Error('trap');
        },
      },
    );
    for (const value of [cyclic, 10n, new Float32Array(1_000_000), trapping]) {
      let caught: unknown;
      try {
        createStagingPool({ slotBytes: 1024, slotCount: 1, shared: value as never });
      } catch (error) {
        caught = error;
      }
      expect(caught).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((caught as Error).message).toMatch(/^shared must be true or false, got /);
      expect((caught as Error).message.length).toBeLessThan(200);
    }
  });

  it('strings and numbers still show their value', () => {
    for (const [value, shown] of [
      ['false', 'got string "false"'],
      [0, 'got 0'],
    ] as const) {
      expect(() => createStagingPool({ slotBytes: 1024, slotCount: 1, shared: value as never })).toThrow(shown);
    }
  });
});

describe('options a Proxy whose traps throw', () => {
  const throwing = (trap: 'get' | 'ownKeys'): object =>
    new Proxy(
      {},
      {
        [trap]() {
          throw new Error(`${trap} trap`);
        },
      },
    );

  it('a cache option whose get trap throws is INVALID_ARGUMENT naming the cache option, not the trap error', async () => {
    const error = await loadTensor({ shardName: 'a.safetensors', offsetBytes: 0, sizeBytes: 2 }, { cache: throwing('get') as never }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((error as Error).message).toMatch(/^cache must be a cache handle/);
  });

  it('options whose keys cannot be read are INVALID_ARGUMENT', async () => {
    const error = await loadTensor({ shardName: 'a.safetensors', offsetBytes: 0, sizeBytes: 2 }, throwing('ownKeys') as never).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'options' } });
  });
});

// One format across packages: a wrong value is shown as the codec's describeValue shows it (the
// kernels' and codec's messages), never whole: String() of an array, JSON.stringify of a string and
// a key as given made messages of megabytes.
describe('every argument message: the value as describeValue shows it, bounded', () => {
  const HUGE_STRING = 'x'.repeat(1_000_000);
  const HUGE_ARRAY = new Array<number>(1_000_000).fill(7);
  const MAX_MESSAGE_CHARS = 400;
  const SLICE = { shardName: 'a.safetensors', offsetBytes: 0, sizeBytes: 2 };
  let fixture: CachedModelFixture;
  beforeAll(async () => {
    fixture = await openCachedModel('bounded-argument-messages');
  });
  afterAll(async () => {
    await fixture.close();
  });

  const caught = async (call: () => unknown): Promise<Error & { code?: string; details?: Record<string, unknown> }> => {
    try {
      await call();
    } catch (error) {
      return error as Error;
    }
    throw new Error('expected INVALID_ARGUMENT, got a result');
  };

  // [what, call, the value shown: its describeValue must be in the message]
  const cases: [string, () => unknown, unknown][] = [
    ['a boolean option, a huge string', () => loadTensor(SLICE, { verifyDigest: HUGE_STRING as never }), HUGE_STRING],
    ['a cache option, a huge array', () => loadTensor(SLICE, { cache: HUGE_ARRAY as never }), HUGE_ARRAY],
    ['a pool option, a huge string', () => loadTensor(SLICE, { pool: HUGE_STRING as never }), HUGE_STRING],
    ['a reader option, a huge array', () => loadTensor(SLICE, { reader: HUGE_ARRAY as never }), HUGE_ARRAY],
    ['a signal option, a huge string', () => loadTensor(SLICE, { signal: HUGE_STRING as never }), HUGE_STRING],
    ['a byte count, a huge array', () => loadTensor(SLICE, { syncReadMaxBytes: HUGE_ARRAY as never }), HUGE_ARRAY],
    ['a byte count, a huge string', () => loadModel(fixture.model, null, { maxStagingBytes: HUGE_STRING as never }), HUGE_STRING],
    ['a callback option, a huge string', () => loadModel(fixture.model, null, { onTensor: HUGE_STRING as never }), HUGE_STRING],
    ['concurrency, a huge array', () => loadModel(fixture.model, null, { concurrency: HUGE_ARRAY as never }), HUGE_ARRAY],
    ['the backend, a huge array', () => loadTensor({ model: fixture.model, name: 'embed.weight' }, { backend: HUGE_ARRAY as never }), HUGE_ARRAY],
    ['the backend, a huge string', () => loadTensor({ model: fixture.model, name: 'embed.weight' }, { backend: HUGE_STRING as never }), HUGE_STRING],
    ['a coverage, a huge array', () => openShardCache(fixture.dir, { coverageMin: HUGE_ARRAY as never }), HUGE_ARRAY],
    ['a source policy, a huge string', () => openShardCache(fixture.dir, { fileSources: HUGE_STRING as never }), HUGE_STRING],
    ['a cache root, a huge array', () => openShardCache(HUGE_ARRAY as never), HUGE_ARRAY],
    ['a model location, a huge array', () => openModel(HUGE_ARRAY as never), HUGE_ARRAY],
    ['the request, a huge string', () => loadTensor(HUGE_STRING as never, {}), HUGE_STRING],
    ['the request, a huge array', () => loadTensor(HUGE_ARRAY as never, {}), HUGE_ARRAY],
    ['an output buffer, a huge array', () => loadTensor({ model: fixture.model, name: 'embed.weight' }, { target: HUGE_ARRAY as never }), HUGE_ARRAY],
    ['staging pool options, a huge string', () => createStagingPool(HUGE_STRING as never), HUGE_STRING],
  ];
  it.each(cases)('%s', async (_what, call, value) => {
    const error = await caught(call);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(error.message).toContain(`got ${describeValue(value)}`);
    expect(error.message.length).toBeLessThan(MAX_MESSAGE_CHARS);
  });

  // Strings shown inside a message of their own (a location, an option's name, a request's key).
  it.each([
    ['a model location given where an open model goes', () => loadTensor({ model: HUGE_STRING as never, name: 'w' })],
    ['a location that looks like another URL', () => openModel(`http://${HUGE_STRING}`)],
    ['an s3:// location naming an object', () => openModel(`s3://bucket/${HUGE_STRING}/model.safetensors`)],
    ['an unknown option', () => loadTensor(SLICE, { [HUGE_STRING]: true } as never)],
    ['a slice offset, a huge string', () => loadTensor({ model: fixture.model, slice: { ...SLICE, offsetBytes: HUGE_STRING as never } })],
    ['a slice of a huge shard name', () => loadTensor({ model: fixture.model, slice: { ...SLICE, shardName: HUGE_STRING } })],
    ['a bare slice of a huge shard name', () => loadTensor({ ...SLICE, shardName: HUGE_STRING }, { cache: fixture.cache })],
    ['a request with a huge key', () => loadTensor({ [HUGE_STRING]: 1, model: fixture.model } as never)],
    ['a request of many object fields', () => loadTensor(Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`field${i}`, { nested: HUGE_STRING }])) as never)],
  ] as const)('%s', async (_what, call) => {
    const error = await caught(call);
    expect(error).toMatchObject({ code: expect.stringMatching(/^(INVALID_ARGUMENT|SHARD_NOT_FOUND)$/) });
    expect(error.message).toContain('...'); // cut, as describeValue cuts
    expect(error.message.length).toBeLessThan(MAX_MESSAGE_CHARS);
  });
});
