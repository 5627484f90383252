// A local cache this process cannot write (a read-only mount shipped beside a model, another user's
// directory): a report's remedy that a build writes into the cache (a binding, --rebind, --repair)
// said it as if it could happen there ("a build of this model binds it"); it now says where it can.
// CI runs as root, whom a chmod does not stop: the loads run in a child process as nobody then.
import { spawnSync } from 'node:child_process';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, tunedWeights, writeModel } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('read-only-details'));
});
afterAll(async () => {
  await chmod(join(root, 'cache'), 0o755).catch(() => undefined);
  await cleanup?.();
});

/** What a report says of a remedy it cannot carry out in this cache, and what to do instead. */
const ELSEWHERE = / where the cache can be written: this process cannot write this one \((EACCES|EROFS|EPERM)\), so build with write access to it, or into a writable copy of it/;

it('a read-only cache: every detail whose remedy writes the cache says where it can be done', async () => {
  const seed = 71;
  const base = await writeModel(join(root, 'base'), tunedWeights(['a', 'b', 'c'], seed), 1 << 20, 'model');
  const cacheDir = join(root, 'cache');
  // a.weight not cached: its slice is bound to nothing (the tied-weight model below finds c's bytes there).
  await buildCache(base, cacheDir, { skip: ['a.weight'] });
  await base.close();
  const weights = tunedWeights(['a', 'b', 'c'], seed);
  // The same names and layout: b.weight's bytes changed (a fine-tune), against a binding with no record of the file.
  await (await writeModel(join(root, 'tuned'), tunedWeights(['a', 'b', 'c'], seed, 100), 1 << 20, 'model')).close();
  // a.weight holds c.weight's bytes (a tied weight): cached under c's name, which a load does not bind.
  await (await writeModel(join(root, 'tied'), weights.map((t) => (t.name === 'a.weight' ? { ...t, data: weights[2]!.data } : t)), 1 << 20, 'model')).close();
  // c.weight's blob damaged: the base model's load serves it raw (cache-failed).
  const cache = await openShardCache(cacheDir);
  const blob = cache.blobPath([...cache.store.entries()].find((entry) => entry.qualname === 'c.weight')!);
  await cache.close();
  const bytes = await readFile(blob);
  bytes[Math.floor(bytes.length * 0.6)]! ^= 0x10;
  await writeFile(blob, bytes);
  // Readable by all, written by none but the owner (root, who writes anyway: the loads run as nobody then).
  await chmod(root, 0o755);
  await chmod(cacheDir, 0o555);
  const entry = fileURLToPath(new URL('../dist/index.js', import.meta.url));
  const script = `
    import { openSafetensorsModel } from '@splitzip/safetensors';
    import { loadModel, loadTensor, openShardCache } from ${JSON.stringify(entry)};
    const cache = await openShardCache(${JSON.stringify(cacheDir)});
    const seen = {};
    for (const [label, name] of [['tuned', 'tuned'], ['tunedAgain', 'tuned'], ['tied', 'tied'], ['base', 'base']]) {
      const model = await openSafetensorsModel(${JSON.stringify(root)} + '/' + name);
      const load = loadModel(model, cache, { backend: 'cpu' });
      await load.drain();
      seen[label] = Object.fromEntries(load.reports.map((r) => [r.name, { reason: r.reason, detail: r.detail }]));
      await model.close();
    }
    const model = await openSafetensorsModel(${JSON.stringify(root)} + '/tuned');
    const other = await openShardCache(${JSON.stringify(cacheDir)});
    seen.cacheOnly = await loadTensor({ model, name: 'c.weight' }, { cache: other, backend: 'cpu', cacheOnly: true }).then(() => 'loaded', (error) => error.code + ': ' + error.message);
    await other.close();
    await model.close();
    console.log(JSON.stringify(seen));
    await cache.close();
  `;
  const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, cwd: fileURLToPath(new URL('..', import.meta.url)), ...asNobody });
  await chmod(cacheDir, 0o755);
  expect(result.stderr).toBe('');
  type Seen = Record<string, { reason: string; detail: string }>;
  const seen = JSON.parse(result.stdout) as Record<'tuned' | 'tunedAgain' | 'tied' | 'base', Seen> & { cacheOnly: string };

  // Checked and found to hold other bytes (checkSourceBytes), then known so (explainMiss): bound from the
  // base model's file, so a build of this one binds its own file beside it (one binding per file, 0.56).
  const BESIDE = "a build of this model binds this file's tensors beside the other files' bindings \\(one binding per file: revisions of a model share the cache; a tensor that build skips[^)]*\\) where the cache can be written";
  expect(seen.tuned['b.weight']).toMatchObject({ reason: 'stale', detail: expect.stringMatching(new RegExp(`\\(bound from another file of this shard name .*\\): served raw; ${BESIDE}`)) });
  expect(seen.tunedAgain['b.weight']).toMatchObject({ reason: 'stale', detail: expect.stringMatching(new RegExp(`checked earlier through this cache; bound from another file of this shard name .*: served raw; ${BESIDE}`)) });
  // Bytes cached under another tensor's name: a build binds them.
  expect(seen.tied['a.weight']).toMatchObject({ reason: 'missing', detail: expect.stringMatching(/holds these bytes, but this slice was not bound to it .*: a build of this model binds it where the cache can be written/) });
  // A damaged blob: --repair.
  expect(seen.base['c.weight']).toMatchObject({ reason: 'cache-failed', detail: expect.stringMatching(/; if its blob is missing or damaged, `splitzip build <model> --out <cache> --repair` puts it back where the cache can be written/) });
  // cacheOnly, a binding not yet checked: the NOT_CACHED message names what a check that finds other bytes leads to.
  expect(seen.cacheOnly).toMatch(new RegExp(`^NOT_CACHED: .*other bytes: ${BESIDE}`));
  for (const detail of [seen.tuned['b.weight']!.detail, seen.tunedAgain['b.weight']!.detail, seen.tied['a.weight']!.detail, seen.base['c.weight']!.detail, seen.cacheOnly]) {
    expect(detail).toMatch(ELSEWHERE);
  }
});
