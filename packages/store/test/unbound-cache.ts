// The fixture of the one-binding-per-file tests (FILE-BINDINGS.md): a closed cache of entries of
// one shape, none bound, for a test to bind at one slice; and revision n's file stamp.
import { openCacheStore } from '../src/index.js';
import { makeTempDir, makeTensor, toInput, type TestTensor } from './helpers.js';

/**
 * A closed cache of `count` entries of shape [40, 6] (480 raw bytes, `t<i>.weight`), none bound,
 * their tensors from seeds `firstSeed`, `firstSeed + 1`, …: each test file keeps seeds of its own
 * (its keys, whose order breaks recency ties, stay what its cases were written against).
 */
export async function makeUnboundCache(count: number, firstSeed: number): Promise<{ root: string; tensors: TestTensor[] }> {
  const root = await makeTempDir();
  const tensors: TestTensor[] = [];
  for (let i = 0; i < count; i++) tensors.push(makeTensor([40, 6], firstSeed + i));
  const store = await openCacheStore(root, { create: true });
  await store.addEntries(tensors.map((t, i) => toInput(t, `t${i}.weight`)));
  await store.close();
  return { root, tensors };
}

/** Revision n's file of a shard: one size, an mtime and ctime of its own (later n, newer), inode 100 + n. */
export const fileStamp = (n: number): string => `9000:17334000000000000${10 + n}:17334000000000000${10 + n}:${100 + n}`;
