// dropUnboundEntries (`splitzip gc --drop-unbound-entries`) on a large directory cache: N small
// entries, each bound to one slice, half of them then unbound (a quarter by unbindSlices, a quarter
// by aliasSlices with rebind, as a rebuild that found other bytes does). Each measuring phase runs in
// a fresh process (its own peak RSS, a cold store handle); every row has a baseline from the same
// run on the same cache, and the ratio between them.
//
//   pnpm --filter @splitzip/store bench:drop                      # 64,000 entries
//   node bench/measure-drop-unbound.mjs --entries 8000            # or DROP_BENCH_ENTRIES=8000
//
// Needs the built dist (pnpm turbo run build --filter @splitzip/store). The cache lives under the
// OS temp directory and is removed at the end.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { calibrateCodebook, encode, getCodecBackend } from '@splitzip/codec';
import { computeContentKey, openCacheStore } from '../dist/index.js';

const SCRIPT = fileURLToPath(import.meta.url);
/** Entries per addEntries call while building (the builder commits in batches too). */
const BUILD_BATCH = 1_000;
/** Values per payload: 64 to 512 BF16 values, varied so the blobs are not all one size. */
const MIN_VALUES = 64;
const VALUE_SPREAD = 449;

function parseEntries(argv) {
  const flag = argv.indexOf('--entries');
  const raw = flag >= 0 ? argv[flag + 1] : process.env.DROP_BENCH_ENTRIES ?? '64000';
  const count = Number(raw);
  // Multiples of 4: a quarter unbound by unbindSlices, a quarter by rebind, half kept.
  if (!Number.isInteger(count) || count < 4 || count % 4 !== 0) throw new Error(`--entries must be a positive multiple of 4, got ${raw}`);
  return count;
}

function weightLike(count, seed) {
  const values = new Uint16Array(count);
  let s = seed >>> 0;
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let i = 0; i < count; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    f32[0] = ((s / 4294967296) - 0.5) * 0.05;
    values[i] = u32[0] >>> 16;
  }
  return values;
}

function shardOf(i) {
  return `model-${String(i % 8).padStart(5, '0')}.safetensors`;
}

/** Values of entry i: entries 2k and 2k + 1 have as many (a rebind moves a slice to a tensor of its size). */
function valueCountOf(i) {
  return MIN_VALUES + ((Math.floor(i / 2) * 37) % VALUE_SPREAD);
}

function entryInput(i) {
  const count = valueCountOf(i);
  const values = weightLike(count, i + 1);
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const shape = [count];
  return {
    key: computeContentKey(bytes, shape, 'BF16'),
    qualname: `model.layers.${i}.weight`,
    payload: encode(values, calibrateCodebook(values).codebook),
    shape,
    dtype: 'BF16',
    sha256: createHash('sha256').update(bytes).digest('hex'),
    // One slice each; offsets 1 KiB apart (a payload is at most 1,024 raw bytes).
    sliceKeys: [[shardOf(i), i * 1024, count * 2]],
  };
}

const maxRssMb = () => process.resourceUsage().maxRSS / 1024;

async function timed(fn) {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

// ---- child phases (fresh processes) ------------------------------------------------------------

/** Baseline process: open the cache, list the blobs directory, close. */
async function childOpen(root) {
  const open = await timed(() => openCacheStore(root, { compactOnClose: false }));
  const entries = [...open.value.entries()].length;
  await open.value.close();
  const list = await timed(() => readdir(join(root, 'blobs')));
  const manifestBytes = (await stat(join(root, 'manifest.json'))).size;
  return { openMs: open.ms, listMs: list.ms, blobFiles: list.value.length, entries, manifestBytes, maxRssMb: maxRssMb() };
}

/** The drop process: gc and compact before (baselines), dry run, the drop, gc after, with the peak RSS after each. */
async function childDrop(root) {
  const rss = {};
  const open = await timed(() => openCacheStore(root, { compactOnClose: false }));
  const store = open.value;
  rss.open = maxRssMb();
  const gcBefore = await timed(() => store.gc());
  rss.gcBefore = maxRssMb();
  const compact = await timed(() => store.compact());
  rss.compact = maxRssMb();
  const dry = await timed(() => store.dropUnboundEntries({ dryRun: true }));
  rss.dryRun = maxRssMb();
  const drop = await timed(() => store.dropUnboundEntries());
  rss.drop = maxRssMb();
  const gcAfter = await timed(() => store.gc());
  rss.gcAfter = maxRssMb();
  const left = [...store.entries()].length;
  await store.close();
  // Baseline for the drop's unlink loop: as many plain files, made in blobs/ (store closed; it holds
  // as many files then as during the drop: the unlinks work on a directory of the same size) and
  // unlinked one by one with the call the store uses. 1 KiB each and flushed first (sync(1)), as
  // the blobs are: unlinking a file whose blocks were never allocated (ext4's delayed allocation)
  // costs less.
  const names = Array.from({ length: drop.value.count }, (_, i) => join(root, 'blobs', `plain-${i}.bench`));
  const filler = new Uint8Array(1024);
  for (const name of names) await writeFile(name, filler);
  execFileSync('sync');
  const unlink = await timed(async () => {
    for (const name of names) await rm(name, { force: true });
  });
  return {
    openMs: open.ms,
    gcBeforeMs: gcBefore.ms,
    gcBeforeOrphans: gcBefore.value.orphanBlobs.length,
    compactMs: compact.ms,
    dryRunMs: dry.ms,
    dryRunCount: dry.value.count,
    dropMs: drop.ms,
    dropCount: drop.value.count,
    reclaimedBytes: drop.value.reclaimedBytes,
    blobsLeft: drop.value.blobsLeft.length,
    gcAfterMs: gcAfter.ms,
    gcAfterOrphans: gcAfter.value.orphanBlobs.length,
    entriesLeft: left,
    plainUnlinkMs: unlink.ms,
    rss,
  };
}

function runChild(mode, root) {
  const out = execFileSync(process.execPath, [...process.execArgv, SCRIPT, '--child', mode, root], { encoding: 'utf8', maxBuffer: 16 * 2 ** 20 });
  return JSON.parse(out.trim().split('\n').pop());
}

// ---- parent ------------------------------------------------------------------------------------

async function main() {
  const entries = parseEntries(process.argv);
  const root = await mkdtemp(join(tmpdir(), 'splitzip-drop-bench-'));
  try {
    // Build: N entries in batches, one slice each.
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    const keys = new Array(entries);
    const build = await timed(async () => {
      for (let i = 0; i < entries; i += BUILD_BATCH) {
        const batch = [];
        for (let k = i; k < Math.min(entries, i + BUILD_BATCH); k++) {
          const input = entryInput(k);
          keys[k] = input.key;
          batch.push(input);
        }
        await store.addEntries(batch);
      }
      await store.compact();
    });
    // Unbind half: i % 4 === 1 by unbindSlices, i % 4 === 3 by rebinding its slice to entry i - 1.
    const unbindItems = [];
    const rebindItems = [];
    for (let i = 0; i < entries; i++) {
      const sizeBytes = valueCountOf(i) * 2;
      if (i % 4 === 1) unbindItems.push({ shardName: shardOf(i), offsetBytes: i * 1024, sizeBytes, key: keys[i] });
      if (i % 4 === 3) rebindItems.push({ key: keys[i - 1], shardName: shardOf(i), offsetBytes: i * 1024, sizeBytes });
    }
    const unbind = await timed(() => store.unbindSlices(unbindItems));
    const rebind = await timed(() => store.aliasSlices(rebindItems, { rebind: true }));
    if (unbind.value !== unbindItems.length || !rebind.value.every(Boolean)) throw new Error('unbinding did not take');
    await store.close();

    const before = runChild('open', root);
    const drop = runChild('drop', root);
    const after = runChild('open', root);
    if (drop.dropCount !== entries / 2 || drop.dryRunCount !== entries / 2 || after.entries !== entries / 2) {
      throw new Error(`expected ${entries / 2} dropped, got ${JSON.stringify({ drop, after })}`);
    }

    const rows = [];
    const row = (name, value, unit, baselineName, baseline) => rows.push([name, value, unit, baselineName, baseline, baseline ? `${(value / baseline).toFixed(2)}x` : '']);
    const half = entries / 2;
    row(`build: ${entries} entries (batches of ${BUILD_BATCH}) + compact`, build.ms, 'ms');
    row(`unbindSlices: ${unbindItems.length} slices`, unbind.ms, 'ms');
    row(`aliasSlices rebind: ${rebindItems.length} slices`, rebind.ms, 'ms');
    row(`open before (${entries} entries, ${(before.manifestBytes / 2 ** 20).toFixed(1)} MiB manifest)`, before.openMs, 'ms', `readdir of blobs/ (${before.blobFiles} files)`, before.listMs);
    row('gc before the drop (nothing to remove)', drop.gcBeforeMs, 'ms', 'open before', before.openMs);
    row('compact before the drop (manifest rewrite, same entries)', drop.compactMs, 'ms', 'open before', before.openMs);
    row(`dropUnboundEntries dry run (${drop.dryRunCount} unbound)`, drop.dryRunMs, 'ms', 'gc before the drop', drop.gcBeforeMs);
    row(`dropUnboundEntries (${drop.dropCount} entries, ${(drop.reclaimedBytes / 2 ** 20).toFixed(1)} MiB of blobs)`, drop.dropMs, 'ms', 'compact before + plain unlink of as many files', drop.compactMs + drop.plainUnlinkMs);
    row('  its share above a compaction, per dropped entry', ((drop.dropMs - drop.compactMs) * 1e3) / half, 'us', 'plain unlink in blobs/, per file', (drop.plainUnlinkMs * 1e3) / half);
    row(`gc after the drop (${drop.gcAfterOrphans} orphans)`, drop.gcAfterMs, 'ms', 'gc before the drop', drop.gcBeforeMs);
    row(`open after (${after.entries} entries, ${(after.manifestBytes / 2 ** 20).toFixed(1)} MiB manifest)`, after.openMs, 'ms', 'open before', before.openMs);
    row('manifest bytes after', after.manifestBytes, 'B', 'manifest bytes before', before.manifestBytes);
    row('peak RSS, drop process (open, gc, compact, dry run, drop, gc)', drop.rss.gcAfter, 'MB', 'peak RSS, open + list process', before.maxRssMb);

    console.log(`dropUnboundEntries benchmark: node ${process.version}, codec backend ${getCodecBackend()}, ${entries} entries, ${new Date().toISOString()}`);
    const fmt = (v) => (typeof v !== 'number' ? v ?? '' : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
    const header = ['measurement', 'value', 'unit', 'baseline', 'baseline value', 'ratio'];
    const lines = rows.map((r) => r.map(fmt));
    const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
    const print = (cells) => console.log(`| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`);
    print(header);
    console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
    for (const line of lines) print(line);
    const r = drop.rss;
    console.log(`drop process peak RSS after each step (MB): open ${fmt(r.open)}, gc ${fmt(r.gcBefore)}, compact ${fmt(r.compact)}, dry run ${fmt(r.dryRun)}, drop ${fmt(r.drop)}, gc after ${fmt(r.gcAfter)}`);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

const child = process.argv.indexOf('--child');
if (child >= 0) {
  const mode = process.argv[child + 1];
  const root = process.argv[child + 2];
  const result = mode === 'open' ? await childOpen(root) : await childDrop(root);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  await main();
}
