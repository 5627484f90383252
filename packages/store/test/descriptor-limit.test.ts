// Kept blob descriptors under a fixed descriptor limit (systemd's LimitNOFILE, docker --ulimit): they
// are a speed-up only, and must neither crowd out what needs a descriptor nor stay when none is left.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { makeCache, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));

describe('kept blob descriptors under `ulimit -n 256`', () => {
  it.runIf(process.platform === 'linux')('keep to an eighth of the limit, and are all given back when an open runs out (the process was left with none: every blob read, model shard and lock failed EMFILE)', { timeout: 60_000 }, async () => {
    const { root, tensors } = await makeCache(300);
    const script = `
      import { openSync } from 'node:fs';
      import * as storeApi from ${JSON.stringify(DIST)};
      const { countOpenBlobFiles, openCacheStore } = storeApi;
      const keptBlobFilesLimit = () => storeApi.keptBlobFilesLimit?.();
      const keys = ${JSON.stringify(tensors.map((t) => [t.key, t.payload.length]))};
      const store = await openCacheStore(${JSON.stringify(root)});
      const out = {};
      try {
        for (const [key, size] of keys) await store.readBlob(key, new Uint8Array(size));
        out.limit = keptBlobFilesLimit();
        out.kept = countOpenBlobFiles();
        // Room left for others: 150 more descriptors (a model's shards).
        for (let i = 0; i < 150; i++) openSync('/dev/null', 'r');
        out.othersOpened = true;
        // Every descriptor taken, then a blob that is not kept: its open sheds the kept ones.
        for (;;) { try { openSync('/dev/null', 'r'); } catch { break; } }
        const [key, size] = keys[0];
        out.readAtTheLimit = (await store.readBlob(key, new Uint8Array(size))).length === size;
        out.limitAfter = keptBlobFilesLimit();
        out.keptAfter = countOpenBlobFiles();
        // Kept again, every descriptor taken again, then four reads of blobs not kept at once:
        // one sheds, and the three others, which ran out beside it, try again too.
        for (const [k, n] of keys.slice(1, 17)) await store.readBlob(k, new Uint8Array(n));
        for (;;) { try { openSync('/dev/null', 'r'); } catch { break; } }
        const reads = await Promise.allSettled(keys.slice(100, 104).map(([k, n]) => store.readBlob(k, new Uint8Array(n))));
        out.concurrentReads = reads.map((r) => r.status === 'fulfilled' ? 'ok' : r.reason.code + ' ' + r.reason.message.slice(0, 40));
        out.limitAtLast = keptBlobFilesLimit();
      } catch (error) {
        out.error = error.code + ' ' + error.message;
      }
      console.log(JSON.stringify(out));
      process.exit(0);`;
    const result = spawnSync('bash', ['-c', 'ulimit -n 256 && exec "$0" --input-type=module -e "$1"', process.execPath, script], { encoding: 'utf8', timeout: 50_000 });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({ limit: 32, kept: 32, othersOpened: true, readAtTheLimit: true, limitAfter: 16, keptAfter: 1, concurrentReads: ['ok', 'ok', 'ok', 'ok'], limitAtLast: 8 });
  });
});
