// Hooks that force interleavings of S3 alias writers (the race and moveFrom suites): a store's
// first alias object PUT held around callbacks, and the promises the tests meet at.
import type { CacheStore } from '../src/index.js';

type Put = (name: string, body: Uint8Array, contentType?: string) => Promise<void>;

/** Runs `before` ahead of, and `after` behind, this store's first alias object PUT. */
export function holdAliasPut(store: CacheStore, hooks: { before?: () => Promise<void>; after?: () => Promise<void> }): void {
  const transport = (store as unknown as { transport: { putObject: Put } }).transport;
  const put = transport.putObject.bind(transport);
  let first = true;
  transport.putObject = async (name, body, contentType) => {
    const alias = name.startsWith('slices/') && first;
    if (alias) first = false;
    if (alias && hooks.before) await hooks.before();
    await put(name, body, contentType);
    if (alias && hooks.after) await hooks.after();
  };
}

/** A promise and the function that resolves it. */
export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A point `parties` writers must all reach before any goes on. */
export function barrier(parties: number): () => Promise<void> {
  let arrived = 0;
  const open = deferred();
  return () => {
    if (++arrived === parties) open.resolve();
    return open.promise;
  };
}
