// Options of the store's calls are checked before anything is read or written: a value of the
// wrong kind, or a misspelt key, is INVALID_ARGUMENT naming the option.
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCacheStore, recoverDamagedManifest, type CacheStore, type VerifyOptions } from '../src/index.js';
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
