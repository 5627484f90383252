// A build running beside `gc --drop-unbound-entries`: the drop removes an entry the build found by
// content key before it (bound to nothing then) at each moment between that lookup and the build's
// use of it: before its blob check (its put-back got ENTRY_NOT_FOUND), before --repair's read of the
// blob, before its alias (false: NOT_WRITABLE "vanished"), after an addEntry that found the entry
// another writer had just added (added: false, then the alias), and after the encode path's second
// look found it. The build stores the tensor again (encoded, with its slice) and exits 0; an entry
// that goes again after that (a gc and another writer re-adding it unbound, looping beside the
// build) fails it, once, with a message saying so. Identical tensors that lose the entry together store it once, the first in model order
// (`encoded`), the others bound to it (`cached`); a blob put back before the drop is counted once.
// A false alias with the entry still there (an s3:// drop put it back) is bound once more; twice
// fails. On s3:// (the gateway): a drop between the build's alias listing and its alias PUT (the
// store answers false, it threw SLICE_CONFLICT) or before the alias: stored again, exit 0.
// The other writer and the gc are second store handles in this process, run from the build's
// store calls (helpers/intercept-store.ts).
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type * as Store from '@splitzip/store';
import type { BuildReport } from '../src/build-cache.js';
import { copyTensor, createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';
import { describeS3, dropBucket, rawClient, uniqueBucket } from './helpers/s3.js';

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
  /** s3://: what runs before the build's next alias object PUT (after its aliasSlices listed the cache), once. */
  beforeAliasPut: undefined as (() => Promise<void>) | undefined,
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
    if (property === 'aliasSlices' && race.beforeAliasPut !== undefined) {
      // The S3 store's transport, reached below the proxy: its calls from inside aliasSlices are its own.
      const transport = (target as unknown as { transport: { putObject: (name: string, ...rest: unknown[]) => Promise<void> } }).transport;
      const put = transport.putObject.bind(transport);
      transport.putObject = async (name, ...rest) => {
        const before = name.startsWith('slices/') ? race.beforeAliasPut : undefined;
        if (before !== undefined) {
          race.beforeAliasPut = undefined;
          await before();
        }
        return put(name, ...rest);
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
  race.beforeAliasPut = undefined;
});

let models = 0;
const TENSOR = gaussianBf16('layers.0.weight', [64, 64], 4101);

interface Fixture {
  model: string;
  cache: string;
}

/**
 * A model (one tensor, or `copies` of it) and a cache, empty or holding the tensor's entry bound to
 * nothing (`unbound`); `s3Cache`: the cache's s3:// URL instead of a directory.
 */
async function prepare(unbound: boolean, copies = 1, s3Cache?: string): Promise<Fixture> {
  const dir = join(temp.path, `case-${++models}`);
  await mkdir(dir);
  const tensors = [TENSOR, ...Array.from({ length: copies - 1 }, (_, i) => copyTensor(`layers.${i + 1}.weight`, TENSOR))];
  const model = await writeSingleFileModel(join(dir, 'model.safetensors'), tensors);
  const cache = s3Cache ?? join(dir, 'cache');
  if (!unbound) {
    await (await actual.openCacheStore(cache, { create: true })).close();
    return { model, cache };
  }
  const built = await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--quiet']);
  expect(built.code, built.err).toBe(0);
  const store = await actual.openCacheStore(cache);
  const [entry] = [...store.entries()];
  expect(await store.unbindSlices(entry!.sliceKeys.map(([shardName, offsetBytes, sizeBytes]) => ({ shardName, offsetBytes, sizeBytes })))).toBe(copies);
  await store.close();
  return { model, cache };
}

/** `gc --drop-unbound-entries`, as another process would run it between two of the build's calls. */
function dropUnbound(cache: string): () => Promise<void> {
  return async () => {
    const gc = await actual.openCacheStore(cache);
    try {
      // s3://: the entry was made a moment ago; exclusive is claimed falsely on purpose: the build
      // under test runs beside it, to exercise the writer's side (the safety net for such a mistake).
      const options = actual.isS3Url(cache) ? ({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true, exclusive: true } as Store.S3DropUnboundEntriesOptions) : {};
      race.dropped += (await gc.dropUnboundEntries(options)).count;
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

  it('a false alias while the entry is still there (an s3:// drop put it back after the store took the alias back) is bound once more: cached, exit 0', async () => {
    const fixture = await prepare(true);
    race.answer.set('aliasSlices', async () => [false]);
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(report!.tensors.map((t) => t.status)).toEqual(['cached']);
    expect(report!).toMatchObject({ encoded: 0, stored_bytes: 0, aliased: 1 });
    await expectStoredAndBound(fixture, report!);
  });

  it('an ENTRY_NOT_FOUND, or a false alias twice while the entry is still there (a refresh finds it), fails as before: nothing encoded again', async () => {
    const fixture = await prepare(true);
    const { StoreError } = actual;
    race.answer.set('checkBlob', async () => {
      throw new StoreError('ENTRY_NOT_FOUND', 'no entry with this key (a test fault)');
    });
    const blobCheck = await buildJson(fixture);
    expect(blobCheck.code).toBe(1);
    expect(blobCheck.err).toMatch(/ENTRY_NOT_FOUND: no entry with this key \(a test fault\)/);
    // Twice in a row: once is an s3:// drop that put the entry back after the store took its alias
    // back (below), bound once more.
    race.answer.set('aliasSlices', async () => {
      race.answer.set('aliasSlices', async () => [false]);
      return [false];
    });
    const alias = await buildJson(fixture);
    expect(alias.code).toBe(1);
    expect(alias.err).toMatch(/NOT_WRITABLE: entry [0-9a-f]{40} vanished from the cache while aliasing its slice/);
    // Still the entry of the first build, bound to nothing: neither run stored or bound anything.
    const store = await actual.openCacheStore(fixture.cache);
    expect([...store.entries()].map((e) => e.sliceKeys.length)).toEqual([0]);
    await store.close();
  });
});

describe('identical tensors whose entry a gc --drop-unbound-entries removes', () => {
  /** Counts the build's addEntry calls (each stores a payload it read and encoded). */
  function countAdds(): { adds: number } {
    const counter = { adds: 0 };
    const count = async (): Promise<void> => {
      counter.adds++;
      race.before.set('addEntry', count);
    };
    race.before.set('addEntry', count);
    return counter;
  }

  function expectFirstEncoded(report: BuildReport, copies: number): void {
    expect(report.tensors.map((t) => t.status)).toEqual(['encoded', ...Array<string>(copies - 1).fill('cached')]);
    expect(report.stored_bytes).toBe(report.tensors[0]!.compBytes);
    expect(report.aliased).toBe(copies);
  }

  it.each([
    ['its blob check', 'checkBlob', []],
    ["--repair's read of the blob", 'readBlob', ['--repair']],
  ])('before %s: stored once, by the first in model order; the others bind it (cached)', async (_what, method, extra) => {
    const fixture = await prepare(true, 3);
    const counter = countAdds();
    race.before.set(method, dropUnbound(fixture.cache));
    const { code, report, err } = await buildJson(fixture, ...extra);
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectFirstEncoded(report!, 3);
    // Read and encoded once (each identical tensor encoded it again and added it: added false).
    expect(counter.adds).toBe(1);
    await expectStoredAndBound(fixture, report!);
  });

  it('with their aliases in flight when the drop runs: the first in model order is encoded, the others cached', async () => {
    const fixture = await prepare(true, 8);
    const counter = countAdds();
    // Every alias of the first attempt waits for the one drop (each alias is its own commit on a
    // directory cache): none binds the entry before it goes.
    const drop = dropUnbound(fixture.cache);
    let dropped: Promise<void> | undefined;
    race.loop = true;
    race.before.set('aliasSlices', () => (dropped ??= drop()));
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectFirstEncoded(report!, 8);
    expect(counter.adds).toBe(1);
    await expectStoredAndBound(fixture, report!);
  });
});

describe('a blob put back and then removed with its entry before the alias', () => {
  it('is counted once in stored_bytes, and the tensor stored anew still says its blob was put back', async () => {
    const fixture = await prepare(true);
    const store = await actual.openCacheStore(fixture.cache);
    const [entry] = [...store.entries()];
    await store.close();
    await rm(join(fixture.cache, 'blobs', `${entry!.key}.bin`));
    race.before.set('aliasSlices', dropUnbound(fixture.cache));
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectEncodedAgain(report!);
    expect(report!.repaired).toBe(1);
    expect(report!.tensors[0]).toMatchObject({ repaired: true, repairedBlob: 'missing' });
    await expectStoredAndBound(fixture, report!);
  });
});

describeS3('on an s3:// cache (no writer lock): a build whose cached entry the drop removes', () => {
  const bucket = uniqueBucket('dropunb');
  let caseNo = 0;
  afterAll(async () => {
    const client = rawClient();
    await dropBucket(client, bucket);
    client.destroy();
  });

  it("between its alias listing and its alias PUT: the store takes the alias back and answers false (it threw SLICE_CONFLICT), and the build stores the tensor again, exit 0", async () => {
    const fixture = await prepare(true, 1, `s3://${bucket}/case-${++caseNo}`);
    race.beforeAliasPut = dropUnbound(fixture.cache);
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectEncodedAgain(report!);
    await expectStoredAndBound(fixture, report!);
  });

  it('before the alias (its listing finds the entry gone): the same', async () => {
    const fixture = await prepare(true, 1, `s3://${bucket}/case-${++caseNo}`);
    race.before.set('aliasSlices', dropUnbound(fixture.cache));
    const { code, report, err } = await buildJson(fixture);
    expect(code, err).toBe(0);
    expect(race.dropped).toBe(1);
    expectEncodedAgain(report!);
    await expectStoredAndBound(fixture, report!);
  });
});
