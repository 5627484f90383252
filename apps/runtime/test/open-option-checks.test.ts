import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeValue } from '@splitzip/codec/internal';
import { createStagingPool, MAX_SLOT_BYTES, MAX_STAGING_POOL_BYTES } from '../src/create-staging-pool.js';
import { openModel } from '../src/open-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

async function caught(run: () => unknown): Promise<{ code?: unknown; message: string; details: Record<string, unknown> }> {
  try {
    await run();
  } catch (error) {
    return error as never;
  }
  throw new Error('did not throw');
}

// openModel took its s3 settings unchecked: `s3: { endpont }` (a typo) was ignored and the load
// went to AWS, `s3: 5` and `readThroughDir: 5` were accepted, `endpoint: 5` failed inside the AWS
// SDK (which printed to stderr). openShardCache refused the typo; both now run the store's one
// check (checkS3Options) before anything is opened, and refuse alike.
describe('openModel and openShardCache check s3 and readThroughDir alike, before any request', () => {
  let fixture: CachedModelFixture;
  beforeAll(async () => {
    fixture = await openCachedModel('open-option-checks');
  });
  afterAll(async () => {
    await fixture.close();
  });

  it('a misspelt s3 key: INVALID_ARGUMENT with a did-you-mean, the same message from both', async () => {
    const s3 = { endpont: 'http://127.0.0.1:1' };
    const model = await caught(() => openModel('s3://bucket/prefix', { s3: s3 as never }));
    const cache = await caught(() => openShardCache('s3://bucket/prefix', { s3: s3 as never }));
    for (const error of [model, cache]) {
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toMatch(/^unknown option "s3\.endpont": did you mean "s3\.endpoint"\? \(known: /);
      expect(error.details).toMatchObject({ option: 's3.endpont', suggestion: 's3.endpoint' });
    }
    expect(model.message).toBe(cache.message);
    // A local model ignores s3, not its spelling.
    expect(await caught(() => openModel(`${fixture.dir}/model`, { s3: s3 as never }))).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 's3.endpont' } });
  });

  it('s3 or readThroughDir of the wrong type, local or s3:// location: INVALID_ARGUMENT naming it, with got', async () => {
    for (const location of ['s3://bucket/prefix', `${fixture.dir}/model`]) {
      for (const [options, option, value] of [
        [{ s3: 5 }, 's3', 5],
        [{ readThroughDir: 5 }, 'readThroughDir', 5],
        [{ s3: { endpoint: 5 } }, 's3.endpoint', 5],
        [{ s3: { region: ['x'] } }, 's3.region', ['x']],
      ] as const) {
        const error = await caught(() => openModel(location, options as never));
        expect(error.code, `${location} ${option}`).toBe('INVALID_ARGUMENT');
        expect(error.message).toMatch(new RegExp(`^${option.replace('.', '\\.')} must be .*, got ${describeValue(value).replace(/[[\]"]/g, '\\$&')}$`));
        expect(error.details).toMatchObject({ option, type: Array.isArray(value) ? 'Array' : typeof value, got: describeValue(value) });
        if (location.startsWith('s3://')) {
          const cacheError = await caught(() => openShardCache(location, options as never));
          expect(cacheError.message).toBe(error.message);
          expect(cacheError.details).toMatchObject({ option, got: describeValue(value) });
        }
      }
    }
  });

  // The message was the store's cut at its last ', got ': a value holding one was cut inside.
  it("an s3 value holding ', got ' is shown whole, the message composed from the store's details", async () => {
    const value = 'yes, got it';
    for (const open of [() => openModel('s3://bucket/prefix', { s3: { forcePathStyle: value } as never }), () => openShardCache('s3://bucket/prefix', { s3: { forcePathStyle: value } as never })]) {
      const error = await caught(open);
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toBe(`s3.forcePathStyle must be true or false or undefined, got ${describeValue(value)}`);
      expect(error.details).toMatchObject({ option: 's3.forcePathStyle', got: describeValue(value) });
    }
  });

  it('openShardCache refreshIntervalMs: the option and the value (details had only root and storeCode)', async () => {
    for (const value of [-5, 0, '10', 2 ** 31]) {
      const error = await caught(() => openShardCache(`${fixture.dir}/cache`, { refreshIntervalMs: value as never }));
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toMatch(/^refreshIntervalMs must be a number of milliseconds > 0 and <= 2147483647 .*, got /);
      expect(error.details).toMatchObject({ option: 'refreshIntervalMs', got: describeValue(value) });
    }
  });

  it('cache.createStagingPool: entries that are not entries are INVALID_ARGUMENT (a TypeError: entries is not iterable), slotCount by createStagingPool\'s rule', async () => {
    for (const entries of [5, null, [null], [{}]]) {
      const error = await caught(() => fixture.cache.createStagingPool({ slotCount: 2, entries: entries as never }));
      expect(error.code, describeValue(entries)).toBe('INVALID_ARGUMENT');
      expect(error.message).toMatch(/^entries must be an iterable of cache entries .*, got /);
      expect(error.details).toMatchObject({ option: 'entries', got: describeValue(entries) });
    }
    expect(fixture.cache.createStagingPool({ slotCount: 1, entries: [...fixture.cache.store.entries()] }).slotCount).toBe(1);
    for (const slotCount of ['a', 0, 1025]) {
      const own = await caught(() => fixture.cache.createStagingPool({ slotCount: slotCount as never }));
      const top = await caught(() => createStagingPool({ slotBytes: 1024, slotCount: slotCount as never }));
      expect(own.code).toBe('INVALID_ARGUMENT');
      expect(own.message).toBe(top.message);
      expect(own.details).toMatchObject({ option: 'slotCount', got: describeValue(slotCount) });
    }
  });

  it('cache.borrowStagingPool: a missing slotCount is named with its value, not details {}', async () => {
    const error = await caught(() => fixture.cache.borrowStagingPool({} as never));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.details).toMatchObject({ option: 'slotCount', got: 'undefined' });
    expect(await caught(() => fixture.cache.borrowStagingPool({ slotBytes: 1024, slotCount: 1, shraed: true } as never))).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'shraed' } });
  });

  // loadModel with maxStagingBytes: Infinity asks for a slot per tensor in flight; above
  // MAX_STAGING_POOL_BYTES it gets fewer slots, not a refusal of its own pool. (Untouched memory:
  // slots are allocated, not written.)
  it('cache.borrowStagingPool lends at most the slots MAX_STAGING_POOL_BYTES holds', () => {
    const { pool } = fixture.cache.borrowStagingPool({ slotBytes: MAX_SLOT_BYTES, slotCount: 64 });
    expect(pool.slotCount).toBe(Math.floor(MAX_STAGING_POOL_BYTES / MAX_SLOT_BYTES));
    expect(pool.slotCount * pool.slotBytes).toBeLessThanOrEqual(MAX_STAGING_POOL_BYTES);
    pool.close();
  });

  it("cache.lookup with 'bf16' names 'BF16'", async () => {
    const error = await caught(() => fixture.cache.lookup(new Uint8Array(2), [1], 'bf16'));
    expect(error.code).toBe('UNKNOWN_DTYPE');
    expect(error.message).toContain('did you mean "BF16"?');
  });
});
