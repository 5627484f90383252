#!/usr/bin/env node
// The main job's last step: load the whole model back through loadModel — once from the SplitZip
// cache, once from the raw safetensors shards — check every tensor bit-identical against the
// safetensors files (read independently with @splitzip/safetensors), and print a short table
// (within 120 columns: format-report-lines.mjs).
//
// Usage: node apps/runtime/bin/load-default-model.mjs [--model DIR] [--cache DIR] [--build]
//                                                     [--backend auto|cpu|threads] [--verify-digest] [--json]
//   --model  a .safetensors file, a shard directory or an index (default: the built-in default
//            model, generated if missing by @splitzip/default-model)
//   --cache  the cache directory (default: <repo>/.cache/default-cache, the one scripts/main.sh builds)
//   --build  build (or complete) the cache first with the builder library if needed (done anyway
//            when the cache directory does not exist yet)
// Exit status: 0 all tensors bit-identical; 1 a mismatch or an error (its typed code is printed);
// 2 a usage error (an unknown option, a missing value).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { formatKeyValueLines, formatNoteLines } from './format-report-lines.mjs';

const USAGE = `usage: node apps/runtime/bin/load-default-model.mjs [--model PATH] [--cache DIR] [--build]
                 [--backend auto|cpu|threads] [--verify-digest] [--json]`;
const BACKENDS = ['auto', 'cpu', 'threads'];

// Strict: a misspelt option or one without its value is refused, never run as the defaults.
let parsed;
try {
  parsed = parseArgs({
    options: {
      model: { type: 'string' },
      cache: { type: 'string' },
      build: { type: 'boolean' },
      backend: { type: 'string' },
      'verify-digest': { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: false,
  }).values;
} catch (error) {
  console.error(`load-default-model: ${error.message}\n${USAGE}`);
  process.exit(2);
}
if (parsed.help) {
  console.log(USAGE);
  process.exit(0);
}
for (const option of ['model', 'cache']) {
  if (parsed[option] === '') {
    console.error(`load-default-model: option '--${option}' needs a path\n${USAGE}`);
    process.exit(2);
  }
}
if (parsed.backend !== undefined && !BACKENDS.includes(parsed.backend)) {
  console.error(`load-default-model: --backend must be one of ${BACKENDS.join(', ')}, got '${parsed.backend}'\n${USAGE}`);
  process.exit(2);
}
// A reader that stops early (| head) closes the pipe: stop quietly, as the splitzip CLI does.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

const REPO = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));
if (!existsSync(DIST)) {
  console.error('load-default-model: @splitzip/runtime is not built; run `pnpm exec turbo run build --filter=@splitzip/runtime`');
  process.exit(1);
}

const formatMb = (bytes) => `${(bytes / 1e6).toFixed(2)} MB`;
/** The paced rows' link: 1 GB/s, where the runtime's benchmark puts network storage. */
const LINK_BYTES_PER_S = 1e9;

async function main() {
  const { createFileReader, createPacedReader, loadModel, openShardCache } = await import(DIST);
  const { openSafetensorsModel, readTensorBytes } = await import('@splitzip/safetensors');
  const { planModelArena } = await import('./plan-model-arena.mjs');
  let modelPath = parsed.model;
  if (modelPath === undefined) {
    const { ensureDefaultModel } = await import('@splitzip/default-model');
    modelPath = await ensureDefaultModel();
  }
  const cacheDir = resolve(parsed.cache ?? join(REPO, '.cache', 'default-cache'));
  // A first run with no cache builds it: "loads the default model back" needs one. An existing
  // directory is never built into unasked (a damaged cache is reported, not papered over).
  if (parsed.build === true || !existsSync(cacheDir)) {
    const { buildModelCache } = await import('../bench/build-model-cache.mjs');
    await buildModelCache(modelPath, cacheDir);
  }
  const backend = parsed.backend ?? 'auto';
  const verifyDigest = parsed['verify-digest'] === true;

  const model = await openSafetensorsModel(modelPath);
  const cache = await openShardCache(cacheDir);
  try {
    // One arena for the model, one view per tensor; both loads write into it in turn. It is the
    // README's recommended setup (runtime README, "Staging"): a codec arena that also holds the
    // staging slots, so decode threads read payloads and write tensors in place.
    const { arena, allocate, pool } = planModelArena(model.tensors, cache, { kind: 'codec', backend: backend === 'cpu' ? 'cpu' : 'auto' });

    // WARMUP untimed loads of each kind (JIT, wasm compile, worker start-up, staging pool: a
    // loader's first loads are slower), then interleaved timed rounds; the medians are reported.
    // The last cache round's bytes stay in the arena.
    const WARMUP = 3;
    const ROUNDS = 15;
    const rawTimes = [];
    const cacheTimes = [];
    let rawTotals;
    let totals;
    let load;
    for (let round = 0; round < WARMUP + ROUNDS; round += 1) {
      const rawStart = performance.now();
      rawTotals = await loadModel(model, null, { allocate, backend }).drain();
      if (round >= WARMUP) rawTimes.push(performance.now() - rawStart);
      arena.fill(0);
      const cacheStart = performance.now();
      load = loadModel(model, cache, { allocate, backend, verifyDigest, pool });
      totals = await load.drain();
      if (round >= WARMUP) cacheTimes.push(performance.now() - cacheStart);
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const rawMs = median(rawTimes);
    const cacheMs = median(cacheTimes);

    // The same loads through a 1 GB/s link (the pacing reader, no burst: a network file system or
    // an object store), where the cache's fewer bytes are what counts. A load ends when its last
    // tensor is handed out and the link has delivered its last byte.
    const pacedLoadMs = async (withCache) => {
      const reader = createPacedReader(createFileReader(), { bytesPerSecond: LINK_BYTES_PER_S, burstBytes: 0 });
      const start = performance.now();
      await loadModel(model, withCache ? cache : null, { allocate, backend, reader, pool: withCache ? pool : undefined }).drain();
      const end = Math.max(performance.now(), reader.linkFreeAtMs);
      await reader.close();
      return end - start;
    };
    const pacedRawTimes = [];
    const pacedCacheTimes = [];
    for (let round = 0; round < WARMUP + ROUNDS; round += 1) {
      const rawPaced = await pacedLoadMs(false);
      const cachePaced = await pacedLoadMs(true);
      if (round >= WARMUP) {
        pacedRawTimes.push(rawPaced);
        pacedCacheTimes.push(cachePaced);
      }
    }
    const pacedRawMs = median(pacedRawTimes);
    const pacedCacheMs = median(pacedCacheTimes);

    // Bit-identical check of the cache load against the shards, read independently.
    const mismatches = [];
    const scratch = new Uint8Array(Math.max(0, ...model.tensors.map((t) => t.slice.sizeBytes)));
    for (const tensor of model.tensors) {
      const expected = await readTensorBytes(model, tensor, scratch);
      const got = allocate(tensor);
      if (!Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength))) {
        mismatches.push(tensor.name);
      }
    }

    const fallbacks = load.reports.filter((r) => r.reason === 'cache-failed');
    if (parsed.json === true) {
      console.log(JSON.stringify({ model: modelPath, cache: cacheDir, rawMs, cacheMs, pacedRawMs, pacedCacheMs, totals, rawTotals, mismatches, fallbacks }));
    } else {
      const reasons = Object.entries(totals.byReason)
        .filter(([reason, count]) => reason !== 'cached' && count > 0)
        .map(([reason, count]) => `${reason} ${count}`)
        .join(', ');
      const rows = [
        ['model', `${modelPath} (${model.tensors.length} tensors, ${formatMb(totals.rawBytes)})`],
        ['cache', cacheDir],
        ['tensors from cache / raw', `${totals.fromCache} / ${totals.fromRaw}${reasons ? ` (raw: ${reasons})` : ''}`],
        ['bytes read: cache load vs raw', `${formatMb(totals.bytesRead)} vs ${formatMb(rawTotals.bytesRead)} (${((100 * totals.bytesRead) / rawTotals.bytesRead).toFixed(1)}%)`],
        ['load time: cache vs raw safetensors', `${cacheMs.toFixed(1)} ms vs ${rawMs.toFixed(1)} ms (medians of ${ROUNDS} rounds after ${WARMUP} warm-up loads, files in the page cache)`],
        [
          'the same through a 1 GB/s link',
          `${pacedCacheMs.toFixed(1)} ms vs ${pacedRawMs.toFixed(1)} ms: the cache ${(pacedRawMs / pacedCacheMs).toFixed(2)}x as fast (the pacing reader, medians of ${ROUNDS} rounds after ${WARMUP} warm-up loads)`,
        ],
        ['decode backend', totals.backends.join(', ') || 'none (nothing cached)'],
        ['bit-identical to the safetensors', mismatches.length === 0 ? `yes, all ${model.tensors.length} tensors` : `NO: ${mismatches.length} differ`],
      ];
      if (verifyDigest) rows.push(['content-key digests checked', `${load.reports.filter((r) => r.digestVerified).length}`]);
      // Within 120 columns, as the builder's reports before it in scripts/main.sh: each result wraps
      // under its column, a long path or tensor name folded (a Markdown table of 129- and 149-column
      // rows before 2026-12-07).
      const lines = formatKeyValueLines(rows);
      for (const f of fallbacks) lines.push(...formatNoteLines(`fallback: ${f.name}: ${f.error?.code}: ${f.error?.message}`));
      for (const name of mismatches.slice(0, 10)) lines.push(...formatNoteLines(`MISMATCH: ${name}`));
      console.log(lines.join('\n'));
    }
    return mismatches.length === 0 ? 0 : 1;
  } finally {
    await cache.close();
    await model.close();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    // The packages' errors start their messages with their code already.
    const code = error.code ?? error.name;
    console.error(`load-default-model: ${String(error.message).startsWith(`${code}: `) ? error.message : `${code}: ${error.message}`}`);
    process.exitCode = 1;
  },
);
