// What a runtime-only embedder needs from the package itself: the store's typed errors, which the
// bound store operations (ShardCache.readBlob, …) throw unwrapped, and every exported function in
// the README's API table (openModel was missing).
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import * as runtime from '../src/index.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('store-error-export');
});
afterAll(async () => {
  await fixture.close();
});

it('readBlob failures are StoreErrors the runtime exports a guard for', async () => {
  const { isStoreError, StoreError } = runtime;
  const missing = await fixture.cache.readBlob('0'.repeat(40), new Uint8Array(1024)).catch((error: unknown) => error);
  expect(missing).toBeInstanceOf(StoreError);
  expect(isStoreError(missing, 'ENTRY_NOT_FOUND')).toBe(true);
  const entry = fixture.cache.store.entries().next().value!;
  const tooSmall = await fixture.cache.readBlob(entry.key, new Uint8Array(1)).catch((error: unknown) => error);
  expect(isStoreError(tooSmall, 'SLOT_TOO_SMALL')).toBe(true);
  expect(isStoreError(new runtime.RuntimeError('ABORTED', 'x', {}))).toBe(false);
});

it("every function the package exports is in the README's API table", () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const table = readme.slice(readme.indexOf('## API'), readme.indexOf('**Requests**'));
  const missing = Object.entries(runtime)
    .filter(([name, value]) => typeof value === 'function' && !table.includes(`\`${name}`) && !table.includes(` ${name}\``) && !table.includes(`\`${name}\``))
    .map(([name]) => name);
  expect(missing).toEqual([]);
});
