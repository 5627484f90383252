// Child process for the concurrency test: aliases slices into a cache from ANOTHER process, in
// several small commits, while the parent is loading. argv[2]: cache dir; argv[3]: JSON array of
// { key, shardName, offsetBytes, sizeBytes, stamp }. Prints "done <n>" on success.
import { openCacheStore } from '@splitzip/store';

const [cacheDir, itemsJson] = process.argv.slice(2);
const items = JSON.parse(itemsJson);
const store = await openCacheStore(cacheDir);
let bound = 0;
for (let i = 0; i < items.length; i += 2) {
  const results = await store.aliasSlices(items.slice(i, i + 2));
  bound += results.filter(Boolean).length;
  await new Promise((resolve) => setTimeout(resolve, 2));
}
await store.close();
process.stdout.write(`done ${bound}\n`);
