import { describe, expect, it } from 'vitest';
import { describeValue } from '@splitzip/codec/internal';
import { createFileReader } from '../src/create-file-reader.js';
import { createPacedReader } from '../src/create-paced-reader.js';
import { createReadWindow } from '../src/create-read-window.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { runOrderedPipeline } from '../src/run-ordered-pipeline.js';
import { createStagingPool, MAX_SLOT_BYTES, MAX_SLOT_COUNT, MAX_STAGING_POOL_BYTES, maxSlotCountFor } from '../src/create-staging-pool.js';

// Every refused option value in the README's form: `<option> must be <what>, got <value>`, with
// details.option naming it and details.got the value as describeValue shows it. These said
// "readWindowBytes must be a positive integer" (details { readWindowBytes }), or named two options
// in one message whichever was wrong.
function caught(run: () => unknown): { code?: unknown; message: string; details: Record<string, unknown> } {
  try {
    run();
  } catch (error) {
    return error as never;
  }
  throw new Error('did not throw');
}

function expectOptionError(run: () => unknown, option: string, value: unknown): void {
  const error = caught(run);
  expect(error.code).toBe('INVALID_ARGUMENT');
  expect(error.message).toMatch(new RegExp(`^${option} must be .+, got `));
  expect(error.message.endsWith(`got ${describeValue(value)}`)).toBe(true);
  expect(error.details).toMatchObject({ option, got: describeValue(value) });
}

describe('option value messages', () => {
  it('readWindowBytes', () => {
    for (const value of [-1, '1e6', 0, 1.5]) expectOptionError(() => createReadWindow(value as never), 'readWindowBytes', value);
  });

  it('createStagingPool slotCount and slotBytes', () => {
    for (const value of [0, 'a', 1.5, MAX_SLOT_COUNT + 1]) {
      expectOptionError(() => createStagingPool({ slotBytes: 1024, slotCount: value as never }), 'slotCount', value);
      expect(caught(() => createStagingPool({ slotBytes: 1024, slotCount: value as never })).message).toContain(`1..${MAX_SLOT_COUNT}`);
    }
    for (const value of [-1, '1024', 1.5, MAX_SLOT_BYTES + 1]) expectOptionError(() => createStagingPool({ slotBytes: value as never, slotCount: 1 }), 'slotBytes', value);
  });

  it('createStagingPool threads', () => {
    expectOptionError(() => createStagingPool({ slotBytes: 1024, slotCount: 1, shared: true, threads: 65 }), 'threads', 65);
  });

  it('createPacedReader bytesPerSecond, chunkBytes and burstBytes, each by itself', () => {
    const inner = createFileReader();
    for (const value of [0, -1, Infinity, '5']) expectOptionError(() => createPacedReader(inner, { bytesPerSecond: value as never }), 'bytesPerSecond', value);
    expectOptionError(() => createPacedReader(inner, { bytesPerSecond: 1, chunkBytes: 0 }), 'chunkBytes', 0);
    expectOptionError(() => createPacedReader(inner, { bytesPerSecond: 1, burstBytes: -1 }), 'burstBytes', -1);
  });

  it('createFileReader maxIdleHandles and syncReadMaxBytes, each by itself', () => {
    const error = caught(() => createFileReader({ maxIdleHandles: -1 }));
    expect(error.message).not.toContain('syncReadMaxBytes');
    expectOptionError(() => createFileReader({ maxIdleHandles: -1 }), 'maxIdleHandles', -1);
    expectOptionError(() => createFileReader({ syncReadMaxBytes: -1 }), 'syncReadMaxBytes', -1);
  });

  // These said 'threads must be an integer in 1..64' ({ threads }), '<name> must be a non-negative
  // integer' ({ [name]: value }), 'concurrency must be a positive integer', 'maxPending must be an
  // integer ≥ concurrency' ({ concurrency, maxPending }): no value, no details.option.
  it('createThreadDecoder threads, readJobsPerWorker and the value counts (no thread is started)', () => {
    for (const value of [0, 65, 1.5, '2']) {
      expectOptionError(() => createThreadDecoder({ threads: value as never }), 'threads', value);
      expect(caught(() => createThreadDecoder({ threads: value as never })).message).toContain('a whole number in 1..64');
      expectOptionError(() => createThreadDecoder({ readJobsPerWorker: value as never }), 'readJobsPerWorker', value);
    }
    for (const option of ['splitMinValues', 'inlineMaxValues', 'startupInlineMaxValues', 'callerShareMaxValues', 'hashInlineMaxBytes']) {
      for (const value of [-1, 0.5, '1']) {
        expectOptionError(() => createThreadDecoder({ [option]: value }), option, value);
        expect(caught(() => createThreadDecoder({ [option]: value })).message).toContain('a whole number >= 0');
      }
    }
  });

  it('runOrderedPipeline concurrency and maxPending (refused at the first next())', async () => {
    const refusal = async (options: { concurrency: unknown; maxPending?: unknown }) => {
      try {
        await runOrderedPipeline([1], { ...(options as { concurrency: number }), run: async (x: number) => x }).next();
      } catch (error) {
        return error as ReturnType<typeof caught>;
      }
      throw new Error('did not throw');
    };
    for (const value of [0, -1, 1.5, '2']) {
      const error = await refusal({ concurrency: value });
      expectOptionError(() => {
        throw error;
      }, 'concurrency', value);
      expect(error.message).toContain('a whole number >= 1');
    }
    for (const value of [1, 2.5, '8']) {
      const error = await refusal({ concurrency: 3, maxPending: value });
      expectOptionError(() => {
        throw error;
      }, 'maxPending', value);
      expect(error.message).toContain('a whole number >= concurrency (3)');
    }
  });
});

describe('MAX_STAGING_POOL_BYTES', () => {
  it('refuses a pool whose slots together exceed it, before allocating, naming slotCount', () => {
    // 1,024 slots of 2 GiB (2 TiB) were accepted. 33 of 2 GiB: just over the limit.
    const error = caught(() => createStagingPool({ slotBytes: 2 ** 31, slotCount: 33 }));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toMatch(/^slotCount must be at most 32 for slots of 2147483648 bytes \(MAX_STAGING_POOL_BYTES: 68719476736 bytes of slots in all\), got 33/);
    expect(error.details).toMatchObject({ option: 'slotCount', got: '33', slotBytes: 2 ** 31, totalBytes: 33 * 2 ** 31, limit: MAX_STAGING_POOL_BYTES });
    expect(caught(() => createStagingPool({ slotBytes: 2 ** 31, slotCount: 1024 })).details).toMatchObject({ option: 'slotCount', got: '1024' });
  });

  it('always fits one slot of the largest size, and MAX_SLOT_COUNT small ones', () => {
    // One slot of the largest size: the pool's own rule, not the constants compared.
    const largest = createStagingPool({ slotBytes: MAX_SLOT_BYTES, slotCount: 1, codecArena: false });
    expect(largest.slotCount).toBe(1);
    largest.close();
    expect(maxSlotCountFor(MAX_SLOT_BYTES)).toBe(16);
    expect(maxSlotCountFor(2 ** 31)).toBe(32);
    expect(maxSlotCountFor(0)).toBe(MAX_SLOT_COUNT);
    expect(maxSlotCountFor(64 << 20)).toBe(MAX_SLOT_COUNT);
    expect(createStagingPool({ slotBytes: 1 << 20, slotCount: MAX_SLOT_COUNT, codecArena: false }).slotCount).toBe(MAX_SLOT_COUNT);
  });
});
