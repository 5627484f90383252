// Options of the store's calls are checked before anything is read or written: a value of the
// wrong kind, or a misspelt key, is INVALID_ARGUMENT naming the option.
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkS3Options, openCacheStore, openS3ObjectSource, recoverDamagedManifest, type CacheStore, type VerifyOptions } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, toInput } from './helpers.js';

async function makeStore(): Promise<{ root: string; store: CacheStore }> {
  const root = await makeTempDir();
  const store = await openCacheStore(root, { create: true });
  await store.addEntries([toInput(makeTensor([64], 1), 'a', [['s', 0, 128]])]);
  return { root, store };
}

describe('values of the wrong kind', () => {
  it('verify({ signal: {} }) and verify({ onProgress: 5 }) are INVALID_ARGUMENT (every blob was reported as IO_ERROR damage)', async () => {
    const { store } = await makeStore();
    for (const [option, options] of [
      ['signal', { signal: {} }],
      ['onProgress', { onProgress: 5 }],
      ['decode', { decode: 'yes' }],
    ] as const) {
      const error = await catchError(() => store.verify(options as unknown as VerifyOptions));
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toContain(option);
      expect(error.details).toMatchObject({ option });
    }
    expect((await store.verify({ signal: new AbortController().signal, onProgress: () => undefined })).ok).toBe(true);
    await store.close();
  });

  it('a null or non-object options argument is INVALID_ARGUMENT, not a bare TypeError', async () => {
    const { root, store } = await makeStore();
    const calls: [string, () => Promise<unknown>][] = [
      ['verify', () => store.verify(null as never)],
      ['gc', () => store.gc(null as never)],
      ['gc', () => store.gc('dry' as never)],
      ['openCacheStore', () => openCacheStore(root, null as never)],
      ['openCacheStore', () => openCacheStore(root, { signal: {} as never })],
      ['recoverDamagedManifest', () => recoverDamagedManifest(root, null as never)],
    ];
    for (const [call, run] of calls) {
      const error = await catchError(run);
      expect(error.code, call).toBe('INVALID_ARGUMENT');
      expect(error.message, call).toContain(call);
    }
    await store.close();
  });
});

describe('gc refuses what it does not take before removing anything', () => {
  it('gc({ dryrun: true }) (misspelt) and gc({ dryRun: "true" }) are INVALID_ARGUMENT, not a real gc that deletes files', async () => {
    const { root, store } = await makeStore();
    const orphan = join(root, 'blobs', `${'a'.repeat(40)}.bin`);
    await writeFile(orphan, 'x');
    const misspelt = await catchError(() => store.gc({ dryrun: true } as never));
    expect(misspelt.code).toBe('INVALID_ARGUMENT');
    expect(misspelt.message).toContain('did you mean "dryRun"');
    expect(misspelt.details).toMatchObject({ option: 'dryrun', suggestion: 'dryRun' });
    for (const dryRun of ['true', 1, null]) {
      const error = await catchError(() => store.gc({ dryRun } as never));
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.details).toMatchObject({ option: 'dryRun' });
    }
    expect(existsSync(orphan)).toBe(true);
    expect((await store.gc({ dryRun: true })).orphanBlobs).toHaveLength(1);
    expect(existsSync(orphan)).toBe(true);
    await store.close();
  });
});

describe('unknown option keys and item fields', () => {
  /** INVALID_ARGUMENT naming `option`, with `suggestion` where one is near. */
  async function expectRefused(run: () => unknown, option: string, suggestion?: string): Promise<void> {
    const error = await catchError(run);
    expect(error.code, option).toBe('INVALID_ARGUMENT');
    expect(error.details, option).toMatchObject({ option, ...(suggestion === undefined ? {} : { suggestion }) });
    if (suggestion !== undefined) expect(error.message).toContain(`did you mean "${suggestion}"`);
  }

  it('openCacheStore and recoverDamagedManifest refuse a misspelt key or a string flag, creating nothing', async () => {
    const { root, store } = await makeStore();
    await store.close();
    const fresh = await makeTempDir();
    await expectRefused(() => openCacheStore(fresh, { creat: true } as never), 'creat', 'create');
    await expectRefused(() => openCacheStore(fresh, { create: 'true' } as never), 'create');
    await expectRefused(() => openCacheStore(fresh, 'create' as never), 'options');
    expect(existsSync(join(fresh, 'manifest.json'))).toBe(false);
    await expectRefused(() => openCacheStore(root, { lockTimeoutMS: 1 } as never), 'lockTimeoutMS', 'lockTimeoutMs');
    await expectRefused(() => openCacheStore(root, { s3: { regoin: 'x' } } as never), 's3.regoin', 's3.region');
    await expectRefused(() => recoverDamagedManifest(root, { lockTimeoutMS: 1 } as never), 'lockTimeoutMS', 'lockTimeoutMs');
  });

  it('addEntries refuses a misspelt field (slicekeys committed the entry with its slices unbound) and string flags, storing nothing', async () => {
    const { store } = await makeStore();
    const tensor = makeTensor([64], 2);
    await expectRefused(() => store.addEntries([{ ...toInput(tensor, 'b'), slicekeys: [['t', 0, 128]] } as never]), 'slicekeys', 'sliceKeys');
    await expectRefused(() => store.addEntries([{ ...toInput(tensor, 'b'), recordBlobSha256: 'no' } as never]), 'recordBlobSha256');
    await expectRefused(() => store.addEntries([{ ...toInput(tensor, 'b'), leaveTakenSlices: 'yes' } as never]), 'leaveTakenSlices');
    expect(store.size).toBe(1);
    expect(store.getEntry(tensor.key)).toBeUndefined();
    await store.close();
  });

  it('aliasSlices, unbindSlices, verify and readBlob refuse misspelt keys and string flags', async () => {
    const { store } = await makeStore();
    const [entry] = [...store.entries()];
    const other = makeTensor([64], 3);
    await store.addEntries([toInput(other, 'c')]);
    const item = { key: entry!.key, shardName: 'n', offsetBytes: 0, sizeBytes: 128 };
    await expectRefused(() => store.aliasSlices([{ ...item, movefrom: other.key } as never]), 'movefrom', 'moveFrom');
    await expectRefused(() => store.aliasSlices([item], { rebnd: true } as never), 'rebnd', 'rebind');
    await expectRefused(() => store.aliasSlices([item], { rebind: 'yes' } as never), 'rebind');
    expect(store.lookupBySlice('n', 0, 128)).toBeUndefined();
    await expectRefused(() => store.unbindSlices([{ shardname: 's', offsetBytes: 0, sizeBytes: 128 } as never]), 'shardname', 'shardName');
    expect(store.lookupBySlice('s', 0, 128)?.key).toBe(entry!.key);
    await expectRefused(() => store.verify({ decod: true } as never), 'decod', 'decode');
    const slot = new Uint8Array(1 << 16);
    await expectRefused(() => store.readBlob(entry!.key, slot, { verifychecksum: false } as never), 'verifychecksum', 'verifyChecksum');
    await expectRefused(() => store.readBlob(entry!.key, slot, { verifyChecksum: 'no' } as never), 'verifyChecksum');
    await expectRefused(() => store.readBlobSync!(entry!.key, slot, { verifychecksum: false } as never), 'verifychecksum', 'verifyChecksum');
    expect((await store.readBlob(entry!.key, slot, { verifyChecksum: false })).length).toBe(entry!.compBytes);
    await store.close();
  });

  it('S3 settings: a misspelt key or a string setting of another type is refused by openCacheStore and openS3ObjectSource alike, before any request (one check, exported for the runtime)', async () => {
    // openS3ObjectSource ignored `endpont` (the requests went to AWS) and passed `endpoint: 5` to the
    // AWS SDK, which failed inside and printed to stderr; openCacheStore refused the first only.
    const fresh = await makeTempDir();
    await expectRefused(() => openS3ObjectSource('s3://bucket/prefix/', { endpont: 'http://127.0.0.1:1' } as never), 'endpont', 'endpoint');
    await expectRefused(() => openS3ObjectSource('s3://bucket/prefix/', 5 as never), 'options');
    for (const key of ['endpoint', 'region', 'readThroughDir']) {
      await expectRefused(() => openS3ObjectSource('s3://bucket/prefix/', { [key]: 5 } as never), key);
      await expectRefused(() => openCacheStore('s3://bucket/prefix', { s3: { [key]: 5 } } as never), `s3.${key}`);
      await expectRefused(() => openCacheStore(fresh, { s3: { [key]: 5 } } as never), `s3.${key}`);
      await expectRefused(() => checkS3Options({ [key]: 5 }, 'openModel'), `s3.${key}`);
    }
    await expectRefused(() => checkS3Options({ endpont: 'x' }, 'openModel'), 's3.endpont', 's3.endpoint');
    expect((await catchError(() => checkS3Options({ endpont: 'x' }, 'openModel'))).message).toMatch(/^INVALID_ARGUMENT: openModel: unknown option "s3\.endpont": did you mean "s3\.endpoint"\?/);
    expect(() => checkS3Options({ endpoint: 'http://127.0.0.1:1', region: 'us-east-1', readThroughDir: fresh, forcePathStyle: true }, 'openModel')).not.toThrow();
  });
});
