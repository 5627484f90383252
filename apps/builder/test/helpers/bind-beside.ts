// A second file's bindings beside the first's in one directory cache (one binding per file,
// FILE-BINDINGS.md), made through the store: `model` built into a cache of its own by the CLI,
// then its entries and bindings (with that file's stamps) merged into `cache` by a handle opened
// with sliceBindingsPerFile. Tests of gc/verify/inspect use it so as not to depend on how build binds.
import { openCacheStore } from '@splitzip/store';
import { runInProcess } from './run-in-process.js';

export async function bindBeside(cache: string, model: string, scratch: string): Promise<void> {
  const built = await runInProcess(['build', model, '--out', scratch, '--quiet']);
  if (built.code !== 0) throw new Error(`build ${model} --out ${scratch} exited ${built.code}: ${built.err}`);
  const from = await openCacheStore(scratch);
  const into = await openCacheStore(cache, { create: true, sliceBindingsPerFile: true });
  try {
    for (const entry of from.entries()) {
      if (into.getEntry(entry.key) === undefined) {
        const payload = await from.readBlob(entry.key, new Uint8Array(entry.compBytes));
        await into.addEntries([{ key: entry.key, qualname: entry.qualname, payload, shape: entry.shape, dtype: entry.dtype, sha256: entry.sha256 }]);
      }
      const items = entry.sliceKeys.map(([shardName, offsetBytes, sizeBytes, stamps]) => ({ key: entry.key, shardName, offsetBytes, sizeBytes, stamp: stamps?.[0] }));
      const bound = await into.aliasSlices(items);
      if (bound.some((ok) => !ok)) throw new Error(`not every binding of ${entry.qualname} was made beside`);
    }
  } finally {
    await into.close();
    await from.close();
  }
}
