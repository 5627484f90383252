// openCacheStore's options, checked before anything is opened or created.
import { describe, expect, it } from 'vitest';
import { MAX_REFRESH_INTERVAL_MS, openCacheStore } from '../src/index.js';
import { catchError, makeTempDir } from './helpers.js';

describe('openCacheStore options', () => {
  it('refreshIntervalMs above Node’s timer limit is INVALID_ARGUMENT (it refreshed every millisecond)', async () => {
    const root = await makeTempDir();
    await (await openCacheStore(root, { create: true })).close();
    const error = await catchError(() => openCacheStore(root, { refreshIntervalMs: 2 ** 31 }));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toContain('refreshIntervalMs');
    expect(error.details).toMatchObject({ refreshIntervalMs: 2 ** 31, limit: MAX_REFRESH_INTERVAL_MS });
    const store = await openCacheStore(root, { refreshIntervalMs: MAX_REFRESH_INTERVAL_MS });
    await store.close();
  });
});
