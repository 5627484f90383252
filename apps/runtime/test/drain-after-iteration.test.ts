import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

// `load.drain()` after a `for await` over the same load that ran to its end returns the totals
// (it threw 'can be iterated once'); after a loop left early the load did not finish, and drain()
// still refuses.
let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('drain-after-iteration');
});
afterAll(async () => {
  await fixture.close();
});

const refused = expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('iterated once') });

describe('drain() after iterating the load', () => {
  it('after a loop that ran to its end: the totals, again on a second call', async () => {
    const load = loadModel(fixture.model, fixture.cache);
    let seen = 0;
    for await (const _tensor of load) seen += 1;
    expect(seen).toBe(fixture.model.tensors.length);
    const totals = await load.drain();
    expect(totals).toBe(load.totals);
    expect(totals.tensors).toBe(seen);
    expect(totals.fromCache).toBeGreaterThan(0);
    expect(await load.drain()).toBe(totals);
  });

  it('of a model opened from its location (closed at the end)', async () => {
    const load = loadModel(fixture.dir + '/model', fixture.cache);
    for await (const _tensor of load) {
      // every tensor
    }
    expect((await load.drain()).tensors).toBe(fixture.model.tensors.length);
  });

  it('after a break, even at the last tensor: refused, the load did not finish', async () => {
    const early = loadModel(fixture.model, fixture.cache, { concurrency: 2 });
    for await (const _tensor of early) break;
    await expect(early.drain()).rejects.toEqual(refused);

    const last = fixture.model.tensors[fixture.model.tensors.length - 1]!.name;
    const atLast = loadModel(fixture.model, fixture.cache);
    for await (const tensor of atLast) {
      if (tensor.name === last) break;
    }
    expect(atLast.totals.tensors).toBe(fixture.model.tensors.length);
    await expect(atLast.drain()).rejects.toEqual(refused);
  });

  it('after a load that failed, or while the loop goes on: refused', async () => {
    const failing = loadModel(fixture.model, fixture.cache, {
      onTensor: () => {
        throw new Error('upload failed');
      },
    });
    await expect(
      (async () => {
        for await (const _tensor of failing) {
          // the first delivery throws
        }
      })(),
    ).rejects.toThrow('upload failed');
    await expect(failing.drain()).rejects.toEqual(refused);

    const going = loadModel(fixture.model, fixture.cache);
    let during: unknown;
    for await (const _tensor of going) {
      during ??= await going.drain().catch((error: unknown) => error);
    }
    expect(during).toEqual(refused);
    expect((await going.drain()).tensors).toBe(fixture.model.tensors.length);
  });

  it('drain() alone, then drain() again: the same totals', async () => {
    const load = loadModel(fixture.model, fixture.cache);
    const totals = await load.drain();
    expect(totals.tensors).toBe(fixture.model.tensors.length);
    expect(await load.drain()).toBe(totals);
  });
});
