// Codec benchmark (not a test): encode/decode throughput on 2^24 Gaussian BF16 values (sigma 0.02),
// single thread, medians, next to a TypedArray.prototype.set copy of the same byte count and Node's
// zlib inflate of the same tensor, all measured in this run, each timed call from cold caches.
// Uses the built dist.
// Rows: user arrays (ordinary typed arrays: the kernels copy blocks through wasm scratch) and
// arena-resident (payload and tensor inside a codec arena: the kernels work in place).
// BENCH_LOG2_N=26 measures a tensor larger than a 32 MiB L3.
// Headline rows (the automatic backend's targets) go to <repo>/.cache/bench for `pnpm bench`'s summary.
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { deflateSync, inflateSync } from 'node:zlib';
import {
  calibrateCodebook,
  calibrateFromHistogram,
  countExponents,
  createCodecArena,
  decode,
  encode,
  getCodecBackend,
  readPayloadMeta,
  setCodecBackend,
  verifyPayloadChecksum,
  convertPayloadVersion,
} from '../dist/index.js';
import { writeBenchSummary } from '@splitzip/bench-utils';
import { gaussianBf16 } from './gaussian-bf16.mjs';

const LOG2_N = Number(process.env.BENCH_LOG2_N ?? 24);
const N = 2 ** LOG2_N;
const RUNS = Number(process.env.BENCH_RUNS ?? 9);
const SIGMA = 0.02;

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  return s[s.length >> 1];
}

const values = gaussianBf16(N, SIGMA, 12345);
const rawBytes = 2 * N;
const { codebook, coverage } = calibrateCodebook(values);
const { escapeCount: knownEscapes } = calibrateFromHistogram(countExponents(values));
const gbps = (seconds) => rawBytes / seconds / 1e9;

// Baseline: a TypedArray.prototype.set copy of the same byte count (the decoded tensor's size).
const copySrc = new Uint16Array(values);
const copyDst = new Uint16Array(N);
// zlib inflate of the same tensor (default level 6), the usual general-purpose baseline.
const raw = new Uint8Array(values.buffer, values.byteOffset, rawBytes);
const deflated = deflateSync(raw);

const available = ['js'];
setCodecBackend('auto');
if (getCodecBackend() === 'wasm-simd') available.unshift('wasm-simd');
const payloads = {};
for (const backend of available) {
  setCodecBackend(backend === 'js' ? 'js' : 'auto');
  payloads[backend] = encode(values, codebook);
  const out = decode(payloads[backend]);
  for (let i = 0; i < N; i++) if (out[i] !== values[i]) throw new Error(`${backend}: mismatch at ${i}`);
}

// Rounds interleave every measurement with the copy baseline, so the machine's load drifts alike
// for both. Two ratios: median GB/s over median copy GB/s, and the median of per-round ratios
// against the copies just before and after each measurement.
// Every timed call starts from cold caches: a 256 MiB copy between two other buffers first. Without
// it the copy just before an operation ran right after the previous round's copy of the same
// buffers and found part of them in cache, while the operation found the copy's lines there: a
// copy after a copy ran 1.15-1.3x a cold copy on this VM (2026-12-03 21:0x, 2^24 values). Tensors a loader
// decodes come from storage, so cold is also the realistic case.
const EVICT_BYTES = 256 << 20;
const evictFrom = new Uint8Array(EVICT_BYTES).fill(1);
const evictTo = new Uint8Array(EVICT_BYTES).fill(2);
const once = (fn) => {
  evictTo.set(evictFrom);
  const t0 = performance.now();
  fn();
  return (performance.now() - t0) / 1000;
};
const out = new Uint16Array(N);
const samples = { copy: [], inflate: [] };
// Encode into a reused buffer: what a builder encoding many tensors gets (a fresh 25 MB payload
// costs page faults that dwarf the encode on this VM; see the 'new payload' rows).
const encodeSlot = new Uint8Array(payloads[available[0]].length);
// Arena: tensor, payload slot, its version-2 twin and output inside one codec arena.
const arena = createCodecArena(2 * rawBytes + 2 * payloads[available[0]].length + (1 << 20));
const arenaValues = arena.allocateValues(N);
arenaValues.set(values);
const arenaSlot = arena.allocate(payloads[available[0]].length);
const arenaOut = arena.allocateValues(N);
const arenaPayload = encode(arenaValues, codebook, { out: arenaSlot });
// The same payload in format version 2 (only the checksum is computed differently), so v2 and v3
// verification are compared in one run.
const arenaSlotV2 = arena.allocate(arenaPayload.length);
arenaSlotV2.set(convertPayloadVersion(arenaPayload, 2));
const ops = {
  'encode (new payload)': () => encode(values, codebook),
  'encode (new payload, escapeCount known)': () => encode(values, codebook, { escapeCount: knownEscapes }),
  'encode (into reused out)': () => encode(values, codebook, { out: encodeSlot }),
  'decode (verify: false)': (p) => decode(p, out, { verify: false }),
  'decode (verify: true)': (p) => decode(p, out),
  'arena: encode (in place)': () => encode(arenaValues, codebook, { out: arenaSlot }),
  'arena: decode (verify: false)': () => decode(arenaPayload, arenaOut, { verify: false }),
  'arena: decode (verify: true)': () => decode(arenaPayload, arenaOut),
  'arena: decode (verify: true), format v2 payload': () => decode(arenaSlotV2, arenaOut),
  'arena: verifyPayloadChecksum': () => verifyPayloadChecksum(arenaPayload),
  'arena: verifyPayloadChecksum, format v2 payload': () => verifyPayloadChecksum(arenaSlotV2),
};
decode(arenaPayload, arenaOut);
for (let i = 0; i < N; i++) if (arenaOut[i] !== values[i]) throw new Error(`arena: mismatch at ${i}`);
if (readPayloadMeta(arenaSlotV2).version !== 2) throw new Error('v2 payload: wrong version');
decode(arenaSlotV2, arenaOut);
for (let i = 0; i < N; i++) if (arenaOut[i] !== values[i]) throw new Error(`arena v2: mismatch at ${i}`);
for (const backend of available) for (const op of Object.keys(ops)) samples[`${backend}/${op}`] = [];
// Steady state, as a loader decoding many tensors sees it: every operation runs untimed first until
// V8 has optimized its JavaScript side (validation, escape patching, block loops). A decode's first
// calls in a process took 5.5, 3.9, ..., 2.3 ms before settling near 1.9 ms after ~12 (2^24 values,
// arena, this VM); timing from the first round put those early calls into the medians.
const WARMUP_CALLS = Number(process.env.BENCH_WARMUP ?? 12);
for (const backend of available) {
  setCodecBackend(backend === 'js' ? 'js' : 'auto');
  for (const [op, fn] of Object.entries(ops)) {
    if (backend === 'js' && op.startsWith('arena')) continue;
    for (let k = 0; k < (backend === 'js' ? 2 : WARMUP_CALLS); k++) fn(payloads[backend]);
  }
}
const ratios = {};
// Operations that allocate (a new 25 MB payload; zlib's 32 MiB result) start V8's incremental
// marking, and its finishing mark-compact (4-9 ms, freeing those buffers) lands in a later call:
// the operation timed right after inflate ran 3x slower in the rounds that timed inflate
// (2026-12-03 23:0x). They run in a second phase, after every other operation's rounds, so their
// garbage is collected among themselves; calling gc() before each timed call instead was worse
// (its concurrent sweeping then ran beside the timed call: every row 1.5-2x slower).
let shuffleSeed = 2463534242;
/** Fisher-Yates with a xorshift32 generator: the same orders in every run. */
const shuffled = (items) => {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    shuffleSeed ^= shuffleSeed << 13;
    shuffleSeed ^= shuffleSeed >>> 17;
    shuffleSeed ^= shuffleSeed << 5;
    const j = (shuffleSeed >>> 0) % (i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
};
const ALLOCATING = new Set(['encode (new payload)', 'encode (new payload, escapeCount known)']);
const timeRound = (r, allocating) => {
  for (const backend of available) {
    setCodecBackend(backend === 'js' ? 'js' : 'auto');
    if (backend === 'js' && r >= 3) continue; // the fallback is slow; 3 rounds are enough
    // A different order every round (a seeded shuffle): an operation's aftermath slowed whichever
    // one came next (the decode timed right after the arena encode ran 0.57-0.73x the copy in that
    // place and 0.88-0.89x in the next, where the other decode took the loss; 2026-12-03 23:4x), so
    // each operation follows a different one from round to round and the medians do not carry it.
    for (const [op, fn] of shuffled(Object.entries(ops))) {
      if (backend === 'js' && op.startsWith('arena')) continue; // no in-place path without wasm
      if (ALLOCATING.has(op) !== allocating) continue;
      const before = once(() => copyDst.set(copySrc));
      const s = once(() => fn(payloads[backend]));
      const after = once(() => copyDst.set(copySrc));
      samples[`${backend}/${op}`].push(s);
      (ratios[`${backend}/${op}`] ??= []).push((before + after) / 2 / s);
    }
  }
};
for (let r = -1; r < RUNS; r++) {
  const copyS = once(() => copyDst.set(copySrc));
  if (r < 0) continue; // warm-up round
  samples.copy.push(copyS);
  timeRound(r, false);
}
for (let r = 0; r < RUNS; r++) timeRound(r, true);
for (let r = 0; r < 5; r++) samples.inflate.push(once(() => inflateSync(deflated)));
setCodecBackend('auto');
const copyS = median(samples.copy);
const inflateS = median(samples.inflate);

const fmt = (x, d = 2) => x.toFixed(d);
console.log(`SplitZip codec benchmark: 2^${LOG2_N} Gaussian BF16 values (sigma ${SIGMA}), single thread, medians of ${RUNS} interleaved rounds (operations in a shuffled order; allocating ones and inflate last) after ${WARMUP_CALLS} untimed calls of each operation, every timed call after a ${EVICT_BYTES >> 20} MiB cache-evicting copy`);
console.log(`node ${process.version}, automatic backend: ${getCodecBackend()}, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')} (others' work skews timings)`);
console.log('');
console.log(`baseline copy (TypedArray.set, ${rawBytes} bytes): ${fmt(gbps(copyS))} GB/s`);
console.log(`baseline zlib inflate (level 6, ${deflated.length} bytes -> ${rawBytes}): ${fmt(gbps(inflateS))} GB/s`);
console.log('');
console.log('| backend | operation | GB/s (BF16) | x copy (median GB/s) | x copy (per-round) | x inflate | target |');
console.log('|---|---|---|---|---|---|---|');
const targets = {
  'encode (new payload)': '>= 0.40x copy',
  'encode (new payload, escapeCount known)': '>= 0.40x copy',
  'encode (into reused out)': '>= 0.40x copy',
  'decode (verify: false)': '>= 0.85x copy, >= 5x inflate',
  'decode (verify: true)': '>= 0.60x copy',
  'arena: encode (in place)': '>= 0.40x copy',
  'arena: decode (verify: false)': '>= 0.85x copy, >= 5x inflate',
  'arena: decode (verify: true)': '>= 0.60x copy',
  'arena: decode (verify: true), format v2 payload': '(comparison)',
  'arena: verifyPayloadChecksum': '(comparison)',
  'arena: verifyPayloadChecksum, format v2 payload': '(comparison)',
};
for (const backend of available) {
  for (const op of Object.keys(ops)) {
    const key = `${backend}/${op}`;
    if (samples[key].length === 0) continue;
    const s = median(samples[key]);
    console.log(`| ${backend} | ${op} | ${fmt(gbps(s))} | ${fmt(copyS / s)} | ${fmt(median(ratios[key]))} | ${fmt(inflateS / s, 1)} | ${targets[op]} |`);
  }
}
const payload = payloads[available[0]];
const meta = readPayloadMeta(payload);
const floor = 0.75 * rawBytes + 3 * meta.escapeCount;
console.log('');
console.log(
  `payload: ${payload.length} bytes for ${rawBytes} raw (ratio ${fmt(payload.length / rawBytes, 4)}), coverage ${coverage.toFixed(6)}, ` +
    `${meta.escapeCount} escapes; above the floor (0.75 x raw + 3 B/escape): ${((payload.length - floor) / rawBytes).toExponential(3)} of raw (target <= 0.003)`,
);
if (payloads['js'] && payloads['wasm-simd']) {
  const same = payloads['js'].length === payloads['wasm-simd'].length &&
    payloads['js'].every((b, i) => b === payloads['wasm-simd'][i]);
  console.log(`wasm-simd and js payloads identical: ${same}`);
  if (!same) process.exitCode = 1;
}

// Headline rows for the root summary: the automatic backend's targets, from this run's medians.
// The "x copy" value is the median of per-round ratios (each measurement against the copies just
// before and after it), the drift-robust one of the two printed.
if (process.exitCode !== 1) {
  const headline = available[0];
  const copyBaseline = `TypedArray.set copy ${fmt(gbps(copyS))} GB/s`;
  const copyRow = (op, minRatio) => {
    const key = `${headline}/${op}`;
    if (!ratios[key]) return null; // arena rows need wasm: none on the js fallback
    const value = median(ratios[key]);
    return {
      metric: `${op} vs copy`,
      value,
      unit: 'x',
      baseline: copyBaseline,
      target: `>= ${minRatio.toFixed(2)}x copy`,
      met: value >= minRatio,
      note: `${fmt(gbps(median(samples[key])))} GB/s, ${headline}, 2^${LOG2_N} values`,
    };
  };
  const decodeS = median(samples[`${headline}/decode (verify: false)`]);
  const overhead = (payload.length - floor) / rawBytes;
  writeBenchSummary({
    packageName: '@splitzip/codec',
    title: `encode/decode of 2^${LOG2_N} Gaussian BF16 values, one thread`,
    environment: { codecBackend: headline, log2Values: LOG2_N, rounds: RUNS },
    rows: [
      copyRow('decode (verify: false)', 0.85),
      {
        metric: 'decode (verify: false) vs zlib inflate',
        value: inflateS / decodeS,
        unit: 'x',
        baseline: `zlib inflate ${fmt(gbps(inflateS))} GB/s`,
        target: '>= 5x inflate',
        met: inflateS / decodeS >= 5,
        note: `${fmt(gbps(decodeS))} GB/s, ${headline}`,
      },
      copyRow('decode (verify: true)', 0.6),
      copyRow('encode (into reused out)', 0.4),
      copyRow('encode (new payload)', 0.4),
      copyRow('arena: decode (verify: false)', 0.85),
      copyRow('arena: decode (verify: true)', 0.6),
      copyRow('arena: encode (in place)', 0.4),
      {
        metric: 'payload size above the floor (0.75 x raw + 3 B/escape)',
        value: overhead,
        unit: 'of raw',
        baseline: `floor ${Math.round(floor)} bytes`,
        target: '<= 0.003 of raw',
        met: overhead <= 0.003,
        note: `ratio ${fmt(payload.length / rawBytes, 4)}, ${meta.escapeCount} escapes`,
      },
    ].filter((row) => row !== null),
  });
}
