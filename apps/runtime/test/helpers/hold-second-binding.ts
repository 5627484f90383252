// A cache that already holds a second binding of some slice (manifest format 3), as a build of a
// revision beside another leaves it: only then does a load bind a file's slice beside another
// file's (a load never moves a cache to format 3, which releases before 0.56 refuse).
import { openCacheStore } from '@splitzip/store';

/** Shard name of the slice bound twice: no model of the tests has it. */
export const SECOND_BINDING_SHARD = 'second-binding-seed.safetensors';

/** Binds SECOND_BINDING_SHARD@0 to two entries of one byte size, with two files' stamps (other inodes than any fixture's). */
export async function holdSecondBinding(cacheDir: string): Promise<void> {
  const store = await openCacheStore(cacheDir, { sliceBindingsPerFile: true });
  try {
    const bySize = new Map<number, string[]>();
    for (const entry of store.entries()) {
      const bytes = entry.shape.reduce((a, b) => a * b, 1) * 2;
      if (bytes === 0) continue;
      const keys = bySize.get(bytes) ?? [];
      keys.push(entry.key);
      bySize.set(bytes, keys);
    }
    const [sizeBytes, keys] = [...bySize].find(([, keys]) => keys.length >= 2)!;
    const slice = { shardName: SECOND_BINDING_SHARD, offsetBytes: 0, sizeBytes };
    await store.aliasSlices([{ key: keys[0]!, ...slice, stamp: '1:1000000000000000000:1000000000000000000:1' }]);
    await store.aliasSlices([{ key: keys[1]!, ...slice, stamp: '1:1000000000000000001:1000000000000000001:2' }]);
    if (!store.holdsSeveralBindings) throw new Error('holdSecondBinding: the store did not bind the slice beside');
  } finally {
    await store.close();
  }
}
