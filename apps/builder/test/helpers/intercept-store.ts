// Tests that stand in for another writer (or slow the store down) at one moment of a build: the
// build opens its store through `@splitzip/store`, so a vi.mock of that module wraps each store it
// opens. Imported inside the vi.mock factory (`await import(...)`): the factory is hoisted above
// this file's imports.
import type * as Store from '@splitzip/store';

/**
 * What replaces one property of the store: a function to return in its place, or undefined to
 * leave the store's own (read at each access, so a test can arm and disarm it).
 */
export type StoreInterceptor = (property: string | symbol, target: Store.CacheStore) => unknown;

/** The store with the properties `intercept` names replaced; its own methods stay bound to it. */
export function interceptStore(store: Store.CacheStore, intercept: StoreInterceptor): Store.CacheStore {
  return new Proxy(store, {
    get(target, property) {
      const replacement = intercept(property, target);
      if (replacement !== undefined) return replacement;
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** The `@splitzip/store` module for a vi.mock factory: every store openCacheStore opens is intercepted. */
export function mockStoreModule(actual: typeof Store, intercept: StoreInterceptor): typeof Store {
  return {
    ...actual,
    openCacheStore: async (...args: Parameters<typeof actual.openCacheStore>) => interceptStore(await actual.openCacheStore(...args), intercept),
  };
}
