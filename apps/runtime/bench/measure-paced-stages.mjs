#!/usr/bin/env node
// Where a paced whole-model load spends its time beyond the link: the default model (or --model DIR
// with --cache DIR) loaded raw and from the cache through the 1 GB/s pacing reader, interleaved, and
// each load's wall time cut into
//   link   = bytes read / rate (what an ideal loader pays: the link never idle, nothing after it);
//   start  = load start → first byte asked of the link (open, lookups, first staging slot);
//   idle   = link time lost mid-load: spans where every granted byte was delivered and no read
//            asked for more (the pacer's idleMs);
//   tail   = the link's last byte delivered → the last tensor handed out (decode, checks, hand-off).
// With --burst-mib > 0 the link delivers that much free, so wall < start + link + idle + tail.
// Also: decode = the report's decode CPU; main = the loading thread's busy time (event loop
// utilization); cpu = the process's CPU time, all threads (less noisy than wall time on a shared box).
// Run with node --cpu-prof to see the calling thread's CPU in those spans.
// --ab-stream: a third path each round, "unstreamed": the cache with the same backend told to stream
// nothing (streamMaxValues 0), so every payload decodes after its last byte (the loader before
// decode-streamed-payload.ts), in the same rounds.
// Rows marked ⁰: the fastest tenth of the rounds (medians over them), what the load costs on a quiet box.
// Usage: node bench/measure-paced-stages.mjs [--rounds 15] [--burst-mib 0] [--backend auto|cpu|threads]
//                                            [--ab-stream] [--model DIR --cache DIR] [--timeline] [--timeline-quantile 0.5] [--only raw|cache] [--reader-sync-kib N] [--concurrency N] [--caller-share-max N] [--inline-max N] [--threads N] [--page-cache] [--no-refresh] [--read-window-mib N]
import { createCodecArena } from '@splitzip/codec';
import { openSafetensorsModel } from '@splitzip/safetensors';
import {
  createFileReader,
  createPacedReader,
  createStagingPool,
  createThreadDecoder,
  DEFAULT_DECODE_THREADS,
  DEFAULT_LOAD_CONCURRENCY,
  DEFAULT_MAX_STAGING_BYTES,
  loadModel,
  openShardCache,
  resolveDecodeBackend,
} from '@splitzip/runtime';
import { resolveBenchModel } from './build-model-cache.mjs';
import { argValue, median } from './bench-helpers.mjs';
import { layoutTensorArena } from '../bin/plan-model-arena.mjs';

const args = process.argv.slice(2);
const ROUNDS = Number(argValue('--rounds', '15'));
const BURST_BYTES = Number(argValue('--burst-mib', '0')) * 1024 * 1024;
// --backend none: a backend that decodes nothing (wrong bytes: only to see what decode costs the load).
const BACKEND_NAME = argValue('--backend', 'auto');
// --caller-share-max N: a thread decoder of its own with that callerShareMaxValues (0: the loading
// thread never shares); --inline-max N: one with that inlineMaxValues.
const CALLER_SHARE = argValue('--caller-share-max', undefined);
const INLINE_MAX = argValue('--inline-max', undefined);
// --threads N: a thread decoder of its own with N decode threads (default: DEFAULT_DECODE_THREADS).
const THREADS = argValue('--threads', undefined);
const BACKEND =
  BACKEND_NAME === 'none'
    ? { name: 'none', verifiesChecksum: true, decode: () => 0 }
    : CALLER_SHARE !== undefined || INLINE_MAX !== undefined || THREADS !== undefined
      ? createThreadDecoder({
          ...(CALLER_SHARE !== undefined ? { callerShareMaxValues: Number(CALLER_SHARE) } : {}),
          ...(INLINE_MAX !== undefined ? { inlineMaxValues: Number(INLINE_MAX) } : {}),
          ...(THREADS !== undefined ? { threads: Number(THREADS) } : {}),
        })
      : BACKEND_NAME;
const TIMELINE = args.includes('--timeline');
const AB_STREAM = args.includes('--ab-stream');
// The same backend object (the process-wide one for a name), seen with streamMaxValues 0.
const UNSTREAMED = AB_STREAM ? Object.create(resolveDecodeBackend(BACKEND), { streamMaxValues: { value: 0 } }) : undefined;
// With --ab-stream the cache path gets the resolved backend too (a name is resolved per load otherwise).
const CACHE_BACKEND = AB_STREAM ? resolveDecodeBackend(BACKEND) : BACKEND;
// --timeline-quantile q: the timeline of the round at that quantile of wall time (default 0.5; 0.1: a
// quiet round on a shared box).
const TIMELINE_QUANTILE = Number(argValue('--timeline-quantile', '0.5'));
// --only cache|raw: one path (for a CPU profile of it alone).
const ONLY = argValue('--only', undefined);
// --page-cache: no pacing reader at all (the store's and safetensors' own reads): only wall, main, cpu mean anything.
const PAGE_CACHE = args.includes('--page-cache');
// --no-refresh: loadModel's refresh: false (to see what the cache refresh costs the start).
const REFRESH = !args.includes('--no-refresh');
const READ_WINDOW_BYTES = argValue('--read-window-mib', undefined) === undefined ? undefined : Number(argValue('--read-window-mib')) * 1024 * 1024;
const CONCURRENCY = argValue('--concurrency', undefined) === undefined ? undefined : Number(argValue('--concurrency'));
const RATE_BYTES_PER_S = 1e9;
// The file reader's syncReadMaxBytes (default: its own).
const READER_SYNC_BYTES = argValue('--reader-sync-kib', undefined) === undefined ? undefined : Number(argValue('--reader-sync-kib')) * 1024;


async function main() {
  const { modelDir, cacheDir } = await resolveBenchModel(argValue('--model', undefined), argValue('--cache', undefined));
  const model = await openSafetensorsModel(modelDir);
  const cache = await openShardCache(cacheDir);
  // The arena of run-bench.mjs (--arena codec): tensors and staging slots in one codec arena.
  const { offsets, size } = layoutTensorArena(model.tensors);
  let largest = 0;
  for (const t of model.tensors) largest = Math.max(largest, cache.lookupBySlice(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes)?.compBytes ?? 0);
  const slotBytes = Math.max(256, Math.ceil(largest / 256) * 256);
  const slotCount = Math.max(1, Math.min(CONCURRENCY ?? DEFAULT_LOAD_CONCURRENCY, Math.floor(DEFAULT_MAX_STAGING_BYTES / slotBytes)));
  const codecArena = createCodecArena(size + slotBytes * slotCount + 256, { threads: BACKEND_NAME === 'cpu' ? 0 : Math.max(DEFAULT_DECODE_THREADS, Number(THREADS ?? 0)) });
  const arena = codecArena.allocate(size);
  arena.fill(0);
  const pool = createStagingPool({ slotBytes, slotCount, arena: codecArena });
  const allocate = (t) => arena.subarray(offsets.get(t.name), offsets.get(t.name) + t.slice.sizeBytes);

  const load = async (withCache, backend = BACKEND) => {
    const paced = createPacedReader(createFileReader({ syncReadMaxBytes: READER_SYNC_BYTES }), { bytesPerSecond: RATE_BYTES_PER_S, burstBytes: BURST_BYTES });
    const events = [];
    const reader = {
      async readExact(path, target, position) {
        const askedMs = performance.now();
        const idleBeforeMs = paced.idleMs;
        // The first piece takes its tokens synchronously: the idle span this read ended is known now.
        const reading = paced.readExact(path, target, position);
        const idleMs = paced.idleMs - idleBeforeMs;
        await reading;
        events.push({ path, bytes: target.byteLength, askedMs, doneMs: performance.now(), idleMs });
      },
      close: () => paced.close(),
    };
    const handedMs = [];
    const elu = performance.eventLoopUtilization();
    const cpu = process.cpuUsage();
    const startMs = performance.now();
    const totals = await loadModel(model, withCache ? cache : null, {
      allocate,
      reader: PAGE_CACHE ? undefined : reader,
      pool: withCache ? pool : undefined,
      backend,
      concurrency: CONCURRENCY,
      refresh: REFRESH,
      readWindowBytes: READ_WINDOW_BYTES,
      explainMisses: false,
      onTensor: () => handedMs.push(performance.now()),
    }).drain();
    // A load is not over before the link has delivered its last byte (the reader settles no read before).
    const endMs = BURST_BYTES > 0 ? performance.now() : Math.max(performance.now(), paced.linkFreeAtMs);
    const mainMs = performance.eventLoopUtilization(elu).active;
    const cpuUsed = process.cpuUsage(cpu);
    await reader.close();
    const linkMs = (totals.bytesRead / RATE_BYTES_PER_S) * 1e3;
    const firstAskMs = events.length > 0 ? Math.min(...events.map((e) => e.askedMs)) : startMs;
    return {
      wallMs: endMs - startMs,
      linkMs,
      startMs: firstAskMs - startMs,
      idleMs: paced.idleMs,
      tailMs: Math.max(0, endMs - paced.linkFreeAtMs),
      decodeMs: totals.decodeMs,
      mainMs,
      cpuMs: (cpuUsed.user + cpuUsed.system) / 1e3,
      events: events.map((e) => ({ ...e, askedMs: e.askedMs - startMs, doneMs: e.doneMs - startMs })),
      handedMs: handedMs.map((t) => t - startMs),
    };
  };

  await load(false);
  await load(true); // warm: handles, workers, JIT
  if (UNSTREAMED) await load(true, UNSTREAMED);
  const runs = { raw: [], cache: [], ...(UNSTREAMED ? { unstreamed: [] } : {}) };
  // Each round runs the paths in a rotated order, so that no path always follows the same one.
  const paths = [
    ...(ONLY !== 'cache' ? [() => load(false).then((x) => runs.raw.push(x))] : []),
    ...(ONLY !== 'raw' ? [() => load(true, CACHE_BACKEND).then((x) => runs.cache.push(x))] : []),
    ...(UNSTREAMED && ONLY !== 'raw' ? [() => load(true, UNSTREAMED).then((x) => runs.unstreamed.push(x))] : []),
  ];
  for (let r = 0; r < ROUNDS; r += 1) {
    for (let p = 0; p < paths.length; p += 1) await paths[(r + p) % paths.length]();
  }
  console.log(`paced ${RATE_BYTES_PER_S / 1e9} GB/s, burst ${BURST_BYTES / 1048576} MiB, backend ${BACKEND_NAME}, reader sync ≤ ${READER_SYNC_BYTES ?? 'default'} B, ${ROUNDS} interleaved rounds (medians, ms)`);
  const keys = ['wallMs', 'linkMs', 'startMs', 'idleMs', 'tailMs', 'decodeMs', 'mainMs', 'cpuMs'];
  console.log(`| path  | ${keys.map((k) => k.replace('Ms', '').padStart(7)).join(' | ')} |`);
  for (const [path, list] of Object.entries(runs).filter(([, l]) => l.length > 0)) {
    console.log(`| ${path.padEnd(5)} | ${keys.map((k) => median(list.map((x) => x[k])).toFixed(2).padStart(7)).join(' | ')} |`);
  }
  // The quietest tenth of the rounds (by wall time), each stage's median over them: on a shared box
  // the medians above carry other processes' load; these show what the load itself costs.
  for (const [path, list] of Object.entries(runs).filter(([, l]) => l.length > 0)) {
    const quiet = [...list].sort((a, b) => a.wallMs - b.wallMs).slice(0, Math.max(1, Math.round(list.length / 10)));
    console.log(`| ${`${path}⁰`.padEnd(5)} | ${keys.map((k) => median(quiet.map((x) => x[k])).toFixed(2).padStart(7)).join(' | ')} |`);
  }
  for (const [path, list] of Object.entries(runs).filter(([, l]) => l.length > 0)) console.log(`${path} wall, sorted: ${list.map((x) => x.wallMs).sort((a, b) => a - b).map((x) => x.toFixed(1)).join(' ')}`);
  console.log(`speedup (median of per-round raw/cache): ${median(runs.raw.map((r, i) => r.wallMs / runs.cache[i].wallMs)).toFixed(3)}x`);
  if (UNSTREAMED) console.log(`speedup unstreamed (median of per-round raw/unstreamed): ${median(runs.raw.map((r, i) => r.wallMs / runs.unstreamed[i].wallMs)).toFixed(3)}x`);
  if (TIMELINE) {
    for (const [path, list] of Object.entries(runs).filter(([, l]) => l.length > 0)) {
      // The round at the asked quantile of wall time (the median by default).
      const last = [...list].sort((a, b) => a.wallMs - b.wallMs)[Math.min(list.length - 1, Math.floor(list.length * TIMELINE_QUANTILE))];
      console.log(`\n${path}: round of ${last.wallMs.toFixed(1)} ms: reads (asked → done ms, bytes, link idle before it), then tensors handed out`);
      for (const e of [...last.events].sort((a, b) => a.askedMs - b.askedMs)) {
        console.log(`  ${e.askedMs.toFixed(2).padStart(7)} → ${e.doneMs.toFixed(2).padStart(7)}  ${String(e.bytes).padStart(8)}  ${e.idleMs > 0.005 ? `idle ${e.idleMs.toFixed(2)}` : '         '}  ${e.path.split('/').pop()}`);
      }
      console.log(`  handed: ${last.handedMs.map((t) => t.toFixed(1)).join(' ')}`);
    }
  }
  await cache.close();
  await model.close();
  await BACKEND.close?.();
}

main().catch((error) => {
  console.error(`measure-paced-stages: ${error.code ?? error.name}: ${error.message}`);
  process.exitCode = 1;
});
