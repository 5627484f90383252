// A build running beside `gc --drop-unbound-entries`: the drop removes an entry the build found by
// content key before it (bound to nothing then) at each moment between that lookup and the build's
// use of it: before its blob check (its put-back got ENTRY_NOT_FOUND), before --repair's read of the
// blob, before its alias (false: NOT_WRITABLE "vanished"), after an addEntry that found the entry
// another writer had just added (added: false, then the alias), and after the encode path's second
// look found it. The build stores the tensor again (encoded, with its slice) and exits 0; an entry
// that goes again after that (a gc looping beside the build) fails it, once, with a message saying
// so. The other writer and the gc are second store handles in this process, run from the build's
// store calls (helpers/intercept-store.ts).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type * as Store from '@splitzip/store';
import type { BuildReport } from '../src/build-cache.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

/** What runs before the build's next call of each store method, with its arguments (one-shot unless `loop`). */
const race = vi.hoisted(() => ({
  before: new Map<string, (...args: unknown[]) => Promise<void>>(),
  /** Run the hooks before every call, not once: a gc and another writer looping beside the build. */
  loop: false,
  /** The build's store answers getEntry(key) with nothing once: its first look found no entry. */
  hideOnce: undefined as string | undefined,
  /** Entries the gc's drops removed. */
  dropped: 0,
  /** The method the build's next call of it reaches instead of the store's (once). */
  answer: new Map<string, (...args: unknown[]) => Promise<unknown>>(),
}));

vi.mock('@splitzip/store', async (importOriginal) => {
  const { mockStoreModule } = await import('./helpers/intercept-store.js');
  return mockStoreModule(await importOriginal<typeof Store>(), (property, target) => {
    if (property === 'getEntry' && race.hideOnce !== undefined) {
      return (key: string) => {
        if (key !== race.hideOnce) return target.getEntry(key);
        race.hideOnce = undefined;
        return undefined;
      };
    }
    const answer = typeof property === 'string' ? race.answer.get(property) : undefined;
    if (answer !== undefined) {
      race.answer.delete(property as string);
      return answer;
    }
    const hook = typeof property === 'string' ? race.before.get(property) : undefined;
    if (hook === undefined) return undefined;
    return async (...args: unknown[]) => {
      if (!race.loop) race.before.delete(property as string);
      await hook(...args);
      return (Reflect.get(target, property) as (...a: unknown[]) => Promise<unknown>).apply(target, args);
    };
  });
});

let temp: TempDir;
let actual: typeof Store;
beforeAll(async () => {
  temp = await createTempDir('splitzip-build-drop-');
  actual = await vi.importActual<typeof Store>('@splitzip/store');
});
afterAll(async () => temp?.cleanup());
beforeEach(() => {
  race.before.clear();
  race.answer.clear();
  race.loop = false;
  race.hideOnce = undefined;
  race.dropped = 0;
});

let models = 0;
const TENSOR = gaussianBf16('layers.0.weight', [64, 64], 4101);

interface Fixture {
  model: string;
  cache: string;
}

/** A one-tensor model and a cache, empty or holding the tensor's entry bound to nothing (`unbound`). */
async function prepare(unbound: boolean): Promise<Fixture> {
  const dir = join(temp.path, `case-${++models}`);
  await mkdir(dir);
  const model = await writeSingleFileModel(join(dir, 'model.safetensors'), [TENSOR]);
  const cache = join(dir, 'cache');
  if (!unbound) {
    await (await actual.openCacheStore(cache, { create: true })).close();
    return { model, cache };
  }
  const built = await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--quiet']);
  expect(built.code, built.err).toBe(0);
  const store = await actual.openCacheStore(cache);
  const [entry] = [...store.entries()];
  expect(await store.unbindSlices(entry!.sliceKeys.map(([shardName, offsetBytes, sizeBytes]) => ({ shardName, offsetBytes, sizeBytes })))).toBe(1);
  await store.close();
  return { model, cache };
}

/** `gc --drop-unbound-entries`, as another process would run it between two of the build's calls. */
function dropUnbound(cache: string): () => Promise<void> {
  return async () => {
    const gc = await actual.openCacheStore(cache);
    try {
      race.dropped += (await gc.dropUnboundEntries()).count;
    } finally {
      await gc.close();
    }
  };
}

/** Another writer committing the tensor's entry, bound to nothing (another model holding the same bytes, later unbound). */
function addUnbound(cache: string): (input: unknown) => Promise<void> {
  return async (input) => {
    const other = await actual.openCacheStore(cache);
    try {
      const { key, payload, shape, dtype } = input as Store.AddEntryInput;
      await other.addEntry({ key, qualname: 'other/layers.0.weight', payload, shape, dtype });
    } finally {
      await other.close();
    }
  };
}

async function buildJson(fixture: Fixture, ...extra: string[]): Promise<{ code: number; report: BuildReport | undefined; err: string }> {
  const result = await runInProcess(['build', fixture.model, '--out', fixture.cache, '--jobs', '0', '--json', ...extra]);
  return { code: result.code, err: result.err, report: result.code === 0 ? (JSON.parse(result.out) as BuildReport) : undefined };
}

/** The tensor's entry is in the cache with its slice bound to it, and verify --model decodes it bit-identical. */
async function expectStoredAndBound(fixture: Fixture, report: BuildReport): Promise<void> {
  const [tensor] = report.tensors;
  const store = await actual.openCacheStore(fixture.cache);
  try {
    expect(store.getEntry(tensor!.key!)?.compBytes).toBe(tensor!.compBytes);
    expect(store.lookupBySlice(tensor!.shard, tensor!.offsetBytes, tensor!.sizeBytes)?.key).toBe(tensor!.key);
  } finally {
    await store.close();
  }
  const verify = await runInProcess(['verify', fixture.cache, '--model', fixture.model]);
  expect(verify.code, verify.out + verify.err).toBe(0);
}

function expectEncodedAgain(report: BuildReport): void {
  expect(report.tensors.map((t) => t.status)).toEqual(['encoded']);
  expect(report.encoded).toBe(1);
  expect(report.stored_bytes).toBe(report.tensors[0]!.compBytes);
  // Its slice bound with the new entry (in the same commit).
  expect(report.aliased).toBe(1);
}

describe('a build whose cached entry a gc --drop-unbound-entries removes after the build found it', () => {
  it('between the lookup and the blob check (the put-back found no entry): the tensor is encoded and stored again, exit 0', async () => {
    const fixture = await prepare(true);
    race.before.set('checkBlob', dropUnbound(fixture.cache));
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectEncodedAgain(report!);
    await expectStoredAndBound(fixture, report!);
  });

  it('between the lookup and --repair\'s read of the blob: the same', async () => {
    const fixture = await prepare(true);
    race.before.set('readBlob', dropUnbound(fixture.cache));
    const { code, report, err } = await buildJson(fixture, '--repair');
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectEncodedAgain(report!);
    expect(report!.repaired).toBe(0);
    await expectStoredAndBound(fixture, report!);
  });

  it('between the blob check and the alias (the alias answered false): the same', async () => {
    const fixture = await prepare(true);
    race.before.set('aliasSlices', dropUnbound(fixture.cache));
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectEncodedAgain(report!);
    await expectStoredAndBound(fixture, report!);
  });

  it('found only by the encode path\'s second look, then removed before the alias: the same', async () => {
    const fixture = await prepare(true);
    const store = await actual.openCacheStore(fixture.cache);
    race.hideOnce = [...store.entries()][0]!.key;
    await store.close();
    race.before.set('aliasSlices', dropUnbound(fixture.cache));
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(race.hideOnce).toBeUndefined();
    expect(race.dropped).toBe(1);
    expectEncodedAgain(report!);
    await expectStoredAndBound(fixture, report!);
  });

  it('added by another writer just before the build\'s addEntry (added: false), then removed before the alias: the same', async () => {
    const fixture = await prepare(false);
    const add = addUnbound(fixture.cache);
    race.before.set('addEntry', async (input) => {
      await add(input);
      race.before.set('aliasSlices', dropUnbound(fixture.cache));
    });
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectEncodedAgain(report!);
    await expectStoredAndBound(fixture, report!);
  });

  it('removed again once stored anew (a gc and another writer looping beside the build): the build fails once, saying so, and does not spin', async () => {
    const fixture = await prepare(false);
    race.loop = true;
    race.before.set('addEntry', addUnbound(fixture.cache));
    race.before.set('aliasSlices', dropUnbound(fixture.cache));
    const { code, err } = await buildJson(fixture);
    expect(code).toBe(1);
    // The first add and its retry, each answered added: false and then dropped before the alias.
    expect(race.dropped).toBe(2);
    expect(err).toMatch(/NOT_WRITABLE/);
    expect(err).toMatch(/went from the cache twice while this build stored it: a gc --drop-unbound-entries/);
    expect(err).toMatch(/run the build again once the gc has finished/);
  });

  it('an ENTRY_NOT_FOUND or a false alias while the entry is still there (a refresh finds it) fails as before: nothing encoded again', async () => {
    const fixture = await prepare(true);
    const { StoreError } = actual;
    race.answer.set('checkBlob', async () => {
      throw new StoreError('ENTRY_NOT_FOUND', 'no entry with this key (a test fault)');
    });
    const blobCheck = await buildJson(fixture);
    expect(blobCheck.code).toBe(1);
    expect(blobCheck.err).toMatch(/ENTRY_NOT_FOUND: no entry with this key \(a test fault\)/);
    race.answer.set('aliasSlices', async () => [false]);
    const alias = await buildJson(fixture);
    expect(alias.code).toBe(1);
    expect(alias.err).toMatch(/NOT_WRITABLE: entry [0-9a-f]{40} vanished from the cache while aliasing its slice/);
    // Still the entry of the first build, bound to nothing: neither run stored or bound anything.
    const store = await actual.openCacheStore(fixture.cache);
    expect([...store.entries()].map((e) => e.sliceKeys.length)).toEqual([0]);
    await store.close();
  });
});
