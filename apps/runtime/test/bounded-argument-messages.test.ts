import { describe, expect, it } from 'vitest';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadTensor } from '../src/load-tensor.js';

// Messages that show a caller's wrong value stay bounded whatever the value: a tensor's data passed
// as the request was listed key by key (one per element), and a boolean option's value was
// serialized whole (a cycle or a BigInt threw a TypeError instead of INVALID_ARGUMENT).
describe('bounded argument messages', () => {
  it('a typed array passed as the request is named by its class and length', async () => {
    const data = new Uint16Array(3_000_000);
    const error = await loadTensor(data as never, {}).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    const message = (error as Error).message;
    expect(message).toContain('Uint16Array of length 3000000');
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
      [0, 'got number 0'],
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
