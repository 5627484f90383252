// The worker-thread decoder against one thread, fairly: the same payload decoded into the same
// kind of output with the same checksum work, in the same rounds (alternating which goes first,
// so drift and other load hit both alike). "in arena": payload and output are views of the
// decoder's shared codec arena, decoded in place on every thread; the one-thread baseline is the
// codec's decode of those same views (in place, fused decode + checksum). "ordinary payload,
// arena out": the decoder copies the payload into its staging arena first. "ordinary": plain
// arrays (the decoder runs the codec on the calling thread: copies would cost more than they
// save). Each baseline is the codec's decode of the same arrays. "in arena, cold": as "in arena" but
// every decode, on either side, takes the next of several payload/output pairs (448 MiB in all, far
// beyond any one core's L3), the way a loader decodes each tensor once, just
// read; the hot rows decode the same arrays every round (each side its own pair, so neither starts by
// pulling lines the other side last wrote out of another core's cache), which a thread may find in its cache.
// "worker alone" rows: one worker does the whole decode (callerDecodes: false) while the caller
// waits; against the caller decoding alone, the difference is the hand-off (post, wake-up, the
// worker's setup, the caller's wake-up at the end) plus any difference in the worker's decoding
// speed. "idle %": the machine's idle CPU share during the row (the box is shared: a row run
// while others load it says little).
// Run alone (with the worker-alone rows): node bench/measure-worker-decoder.mjs [rounds] [log2 sizes...]
// [--arrays=<row's arrays, e.g. "in arena, cold">] [--checksum=split,fused,off] (only those rows), or
// --baseline=<another build's dist/node.js> [--checksum=split,off]: the cold in-arena rows of both
// builds in the same rounds (measureAgainstBaseline; the way to see a change of a few percent).
import { availableParallelism, cpus, loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { calibrateCodebook, decode as codecDecode, encode as codecEncode } from '@splitzip/codec';
import { createWorkerDecoder } from '../dist/node.js';
import { measureCopyScaling } from './measure-copy-scaling.mjs';

/** Gaussian weights (std 0.02) as BF16 by truncation, tiled from a 2^20-value block. */
export function modelLikeValues(n) {
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  const block = new Uint16Array(Math.min(n, 1 << 20));
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  for (let i = 0; i < block.length; i++) {
    f32[0] = Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd()) * 0.02;
    block[i] = u32[0] >>> 16;
  }
  const values = new Uint16Array(n);
  for (let at = 0; at < n; at += block.length) values.set(block.subarray(0, Math.min(block.length, n - at)), at);
  return values;
}

const CHECKSUM_LABELS = {
  split: 'verified (default; v3: each thread decodes + hashes its segments; v1/v2: caller hashes, workers decode)',
  fused: 'verified, splitChecksum: false (v3: as the default; v1/v2: fused, calling thread)',
  off: 'off',
};
/** The cold rows rotate through payload/output pairs of this many bytes in all (8 pairs at 2^24 values). */
const COLD_BYTES = 448 * 2 ** 20;
/** Pairs for a tensor of n values (a payload is < 1.6 bytes a value, its output 2). */
const coldSetsFor = (n) => Math.max(2, Math.ceil(COLD_BYTES / (3.5 * n)));
const medianOf = (times) => [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)];
const gbps = (n, ms) => (2 * n) / (ms * 1e6);
/** Idle and total CPU time of the whole machine so far (ms, all cores). */
const cpuTimes = () =>
  cpus().reduce((sum, { times }) => ({ idle: sum.idle + times.idle, total: sum.total + times.user + times.nice + times.sys + times.idle + times.irq }), {
    idle: 0,
    total: 0,
  });

/** The benchmark tensor of n values and its payload, with the decoder's arena emptied for them. */
function prepareSize(n, decoder) {
  const values = modelLikeValues(n);
  const payload = codecEncode(values, calibrateCodebook(values).codebook);
  decoder.arena.reset();
  return { values, payload };
}

/**
 * Rows { elementCount, arrays, checksum: 'fused' | 'split' | 'off', oneMs, workersMs, ratio, idlePercent, label, copyScaling },
 * medians of `rounds` after one untimed, checked warm-up of each. `aloneRows`: also the "worker
 * alone" rows (not speed-ups to judge against a target: a measure of the hand-off).
 */
export async function measureWorkerDecoder({
  sizes,
  rounds,
  threads = Math.max(1, availableParallelism() - 1),
  aloneRows = false,
  log = console.log,
  arraysFilter = null,
  checksumFilter = null,
}) {
  // Room for the hot pair and the cold pairs: payloads (< 2 bytes a value with the header) and outputs, plus alignment.
  const arenaBytes = Math.max(...sizes.map((n) => (coldSetsFor(n) + 2) * (4 * n + (1 << 16)))) + (1 << 20);
  const decoder = createWorkerDecoder({ threads, arenaBytes });
  // The same arena, verified decodes fused on the calling thread instead of split.
  const fusedDecoder = createWorkerDecoder({ threads, arena: decoder.arena, splitChecksum: false });
  // The same arena, one worker doing all of each decode (the hand-off rows); used one at a time like the others.
  const aloneDecoder = createWorkerDecoder({ threads: 1, arena: decoder.arena, callerDecodes: false });
  const label = `${threads} worker(s) + caller`;
  const rows = [];
  // What a second thread adds to memory bandwidth here and now: large decodes are bound by it.
  const copy = await measureCopyScaling();
  log(`worker decoder: ${label}, ${rounds} rounds per row, load average before ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  log(
    `copies (read + write) in this run: one thread ${copy.oneGBps.toFixed(1)} GB/s, two threads ${copy.twoGBps.toFixed(1)} GB/s = ${copy.ratio.toFixed(2)}x ` +
      '(a memory-bound decode cannot gain more from a second thread)',
  );
  log('| size | arrays | checksum | 1 thread ms (GB/s) | workers ms (GB/s) | workers / 1 thread | idle % |');
  log('|---|---|---|---|---|---|---|');
  try {
    for (const n of sizes) {
      const { values, payload } = prepareSize(n, decoder);
      // Hot rows: each side its own pair, decoded every round. Sharing one pair, each side would
      // start by pulling lines the other side's threads last wrote out of their caches.
      const hotPair = () => {
        const p = decoder.allocatePayload(payload.length);
        p.set(payload);
        return [p, decoder.allocateOutput(n)];
      };
      const [[arenaPayload, arenaOut], [arenaPayloadB, arenaOutB]] = [hotPair(), hotPair()];
      const cold = [];
      for (let k = 0; k < coldSetsFor(n); k++) {
        const p = decoder.allocatePayload(payload.length);
        p.set(payload);
        cold.push([p, decoder.allocateOutput(n)]);
      }
      const setups = [
        ['in arena', [[arenaPayload, arenaOut], [arenaPayloadB, arenaOutB]], 'per side'],
        ['in arena, cold', cold, null],
        ['ordinary payload, arena out', [[payload, arenaOut], [payload, arenaOutB]], 'per side'],
        ['ordinary', [[payload, new Uint16Array(n)], [payload, new Uint16Array(n)]], 'per side'],
        ...(aloneRows
          ? [
              ['in arena, worker alone', [[arenaPayload, arenaOut], [arenaPayloadB, arenaOutB]], 'per side'],
              ['in arena, cold, worker alone', cold, null],
            ]
          : []),
      ];
      for (const [arrays, p, out] of setups) {
        if (arraysFilter !== null && arrays !== arraysFilter) continue;
        const alone = arrays.endsWith('worker alone');
        for (const checksum of alone ? ['split', 'off'] : ['split', 'fused', 'off']) {
          if (checksumFilter !== null && !checksumFilter.includes(checksum)) continue;
          const verify = checksum !== 'off';
          const options = { verify };
          // Cold rows: one counter for both sides, so every decode takes the pair least recently
          // touched. Hot rows ('per side'): side 0 (one thread) always its pair, side 1 its own.
          const perSide = out === 'per side';
          let at = 0;
          const pick = (side) => (perSide ? p[side] : p[at++ % p.length]);
          const one = () => {
            const [pp, oo] = pick(0);
            return codecDecode(pp, oo, options);
          };
          const many = () => {
            const [pp, oo] = pick(1);
            return (alone ? aloneDecoder : checksum === 'fused' ? fusedDecoder : decoder).decode(pp, oo, options);
          };
          // Each side's pairs: cleared, decoded once (untimed), checked.
          for (const [side, run] of [[0, one], [1, many]]) {
            const pairs = perSide ? [p[side]] : p;
            for (const [, oo] of pairs) oo.fill(0);
            for (let k = 0; k < pairs.length; k++) await run();
            for (const [, oo] of pairs) {
              for (let i = 0; i < n; i++) if (oo[i] !== values[i]) throw new Error(`${arrays} decode wrong at ${i}`);
            }
          }
          const oneTimes = [];
          const manyTimes = [];
          const before = cpuTimes();
          for (let r = 0; r < rounds; r++) {
            for (const [run, times] of r % 2 === 0 ? [[one, oneTimes], [many, manyTimes]] : [[many, manyTimes], [one, oneTimes]]) {
              const t = performance.now();
              await run();
              times.push(performance.now() - t);
            }
          }
          const oneMs = medianOf(oneTimes);
          const workersMs = medianOf(manyTimes);
          const after = cpuTimes();
          const idlePercent = (100 * (after.idle - before.idle)) / Math.max(1, after.total - before.total);
          const row = { elementCount: n, arrays, checksum, oneMs, workersMs, ratio: oneMs / workersMs, idlePercent, label, copyScaling: copy.ratio };
          rows.push(row);
          log(
            `| 2^${Math.log2(n)} | ${arrays} | ${CHECKSUM_LABELS[checksum]} | ${oneMs.toFixed(2)} (${gbps(n, oneMs).toFixed(2)}) | ` +
              `${workersMs.toFixed(2)} (${gbps(n, workersMs).toFixed(2)}) | ${row.ratio.toFixed(2)}x | ${idlePercent.toFixed(0)} |`,
          );
        }
      }
    }
  } finally {
    await aloneDecoder.dispose();
    await fusedDecoder.dispose();
    await decoder.dispose();
  }
  log(`load average after ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  return rows;
}

/**
 * A/B of two builds of the decoder in the same rounds: one thread, the baseline build's decoder
 * (`baselineUrl`: another build's dist/node.js) and this build's, in a rotating order every round,
 * on cold pairs in one arena (both decoders attach its share 0: they never run at once). Whole
 * runs of the two builds alternated minutes apart differed by more than the change measured here;
 * in one process, 301 rounds put medians within ~0.01 ms of each other run to run.
 * Prints one row per size: medians, interquartile means and ratios.
 */
export async function measureAgainstBaseline({ sizes, rounds, baselineUrl, verify = true, log = console.log }) {
  const baseline = await import(baselineUrl);
  const threads = Math.max(1, availableParallelism() - 1);
  const arenaBytes = Math.max(...sizes.map((n) => (coldSetsFor(n) + 1) * (4 * n + (1 << 16)))) + (1 << 20);
  const decoder = createWorkerDecoder({ threads, arenaBytes });
  const before = baseline.createWorkerDecoder({ threads, arena: decoder.arena });
  const iqm = (times) => {
    const sorted = [...times].sort((a, b) => a - b);
    const middle = sorted.slice(Math.floor(sorted.length / 4), Math.ceil((3 * sorted.length) / 4));
    return middle.reduce((a, b) => a + b, 0) / middle.length;
  };
  log(`A/B: ${threads} worker(s) + caller, cold pairs in arena, ${verify ? 'verified' : 'checksum off'}, ${rounds} rounds, baseline ${baselineUrl}`);
  log('| size | 1 thread ms | baseline ms (iqm) | this build ms (iqm) | baseline / 1 thread | this build / 1 thread | this build vs baseline |');
  log('|---|---|---|---|---|---|---|');
  try {
    for (const n of sizes) {
      const { values, payload } = prepareSize(n, decoder);
      const pairs = [];
      for (let k = 0; k < coldSetsFor(n); k++) {
        const p = decoder.allocatePayload(payload.length);
        p.set(payload);
        pairs.push([p, decoder.allocateOutput(n)]);
      }
      const options = { verify };
      let at = 0;
      const sides = [
        ['one', async () => codecDecode(...pairs[at++ % pairs.length], options)],
        ['baseline', () => before.decode(...pairs[at++ % pairs.length], options)],
        ['current', () => decoder.decode(...pairs[at++ % pairs.length], options)],
      ];
      for (const [name, run] of sides) {
        for (const [, out] of pairs) out.fill(0);
        for (let k = 0; k < pairs.length; k++) await run();
        for (const [, out] of pairs) {
          for (let i = 0; i < n; i++) if (out[i] !== values[i]) throw new Error(`${name} decode wrong at ${i}`);
        }
      }
      const times = { one: [], baseline: [], current: [] };
      for (let r = 0; r < rounds; r++) {
        for (let j = 0; j < sides.length; j++) {
          const [name, run] = sides[(j + r) % sides.length];
          const t = performance.now();
          await run();
          times[name].push(performance.now() - t);
        }
      }
      const [one, old, now] = [times.one, times.baseline, times.current].map(medianOf);
      log(
        `| 2^${Math.log2(n)} | ${one.toFixed(3)} | ${old.toFixed(3)} (${iqm(times.baseline).toFixed(3)}) | ${now.toFixed(3)} (${iqm(times.current).toFixed(3)}) | ` +
          `${(one / old).toFixed(2)}x | ${(one / now).toFixed(2)}x | ${(now - old >= 0 ? '+' : '') + (now - old).toFixed(3)} ms |`,
      );
    }
  } finally {
    await before.dispose();
    await decoder.dispose();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? null;
  const [rounds = '15', ...logSizes] = args.filter((a) => !a.startsWith('--'));
  const sizes = (logSizes.length ? logSizes : ['20', '22', '24', '26']).map((s) => 2 ** Number(s));
  console.log(`node ${process.version}, ${availableParallelism()} cores`);
  const checksumFilter = flag('checksum')?.split(',') ?? null;
  const baseline = flag('baseline');
  if (baseline !== null) {
    const baselineUrl = pathToFileURL(baseline).href;
    for (const verify of checksumFilter === null ? [true] : checksumFilter.map((c) => c !== 'off')) {
      await measureAgainstBaseline({ sizes, rounds: Number(rounds), baselineUrl, verify });
    }
  } else {
    await measureWorkerDecoder({ sizes, rounds: Number(rounds), aloneRows: true, arraysFilter: flag('arrays'), checksumFilter });
  }
}
