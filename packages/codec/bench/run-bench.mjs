// Codec benchmark (not a test): encode/decode throughput on 2^24 Gaussian BF16 values (sigma 0.02),
// single thread, medians, next to a TypedArray.prototype.set copy of the same byte count and Node's
// zlib inflate of the same tensor, all measured in this run. Uses the built dist.
import { performance } from 'node:perf_hooks';
import { deflateSync, inflateSync } from 'node:zlib';
import {
  calibrateCodebook,
  decode,
  encode,
  getCodecBackend,
  readPayloadMeta,
  setCodecBackend,
} from '../dist/index.js';

const LOG2_N = Number(process.env.BENCH_LOG2_N ?? 24);
const N = 2 ** LOG2_N;
const RUNS = Number(process.env.BENCH_RUNS ?? 9);
const SIGMA = 0.02;

// Deterministic Gaussian BF16 (mulberry32 + Box-Muller, round to nearest even from float32).
function gaussianBf16(n, sigma, seed) {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    f[0] = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()) * sigma;
    const bits = u[0];
    out[i] = (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
  }
  return out;
}

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  return s[s.length >> 1];
}

/** Median seconds of fn over RUNS runs after one warm-up. */
function time(fn, runs = RUNS) {
  fn();
  const ts = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    fn();
    ts.push((performance.now() - t0) / 1000);
  }
  return median(ts);
}

const values = gaussianBf16(N, SIGMA, 12345);
const rawBytes = 2 * N;
const { codebook, coverage } = calibrateCodebook(values);
const gbps = (seconds) => rawBytes / seconds / 1e9;

// Baseline: a TypedArray.prototype.set copy of the same byte count (the decoded tensor's size).
const copySrc = new Uint16Array(values);
const copyDst = new Uint16Array(N);
const copyS = time(() => copyDst.set(copySrc));

// zlib inflate of the same tensor (level 1, the fastest-decoding common setting is not the point:
// it is the usual general-purpose baseline; default level 6).
const raw = new Uint8Array(values.buffer, values.byteOffset, rawBytes);
const deflated = deflateSync(raw);
const inflateS = time(() => inflateSync(deflated), Math.min(RUNS, 5));

const results = {};
const available = ['js'];
setCodecBackend('auto');
if (getCodecBackend() === 'wasm-simd') available.unshift('wasm-simd');
for (const backend of available) {
  setCodecBackend(backend === 'js' ? 'js' : 'auto');
  const payload = encode(values, codebook);
  const out = new Uint16Array(N);
  const encodeS = time(() => encode(values, codebook));
  const decodeS = time(() => decode(payload, out, { verify: false }));
  const decodeVerifyS = time(() => decode(payload, out));
  for (let i = 0; i < N; i++) if (out[i] !== values[i]) throw new Error(`${backend}: mismatch at ${i}`);
  results[backend] = { payload, encodeS, decodeS, decodeVerifyS };
}
setCodecBackend('auto');

const fmt = (x, d = 2) => x.toFixed(d);
console.log(`SplitZip codec benchmark: 2^${LOG2_N} Gaussian BF16 values (sigma ${SIGMA}), single thread, median of ${RUNS} runs`);
console.log(`node ${process.version}, automatic backend: ${getCodecBackend()}`);
console.log('');
console.log(`baseline copy (TypedArray.set, ${rawBytes} bytes): ${fmt(gbps(copyS))} GB/s`);
console.log(`baseline zlib inflate (level 6, ${deflated.length} bytes -> ${rawBytes}): ${fmt(gbps(inflateS))} GB/s`);
console.log('');
console.log('| backend | operation | GB/s (BF16) | x copy | x inflate | target |');
console.log('|---|---|---|---|---|---|');
for (const backend of available) {
  const r = results[backend];
  const line = (op, s, target) =>
    console.log(`| ${backend} | ${op} | ${fmt(gbps(s))} | ${fmt(copyS / s)} | ${fmt(inflateS / s, 1)} | ${target} |`);
  line('encode', r.encodeS, '>= 0.40x copy');
  line('decode (verify: false)', r.decodeS, '>= 0.85x copy, >= 5x inflate');
  line('decode (verify: true)', r.decodeVerifyS, '>= 0.60x copy');
}
const payload = results[available[0]].payload;
const meta = readPayloadMeta(payload);
const floor = 0.75 * rawBytes + 3 * meta.escapeCount;
console.log('');
console.log(
  `payload: ${payload.length} bytes for ${rawBytes} raw (ratio ${fmt(payload.length / rawBytes, 4)}), coverage ${coverage.toFixed(6)}, ` +
    `${meta.escapeCount} escapes; above the floor (0.75 x raw + 3 B/escape): ${((payload.length - floor) / rawBytes).toExponential(3)} of raw (target <= 0.003)`,
);
if (results['js'] && results['wasm-simd']) {
  const same = results['js'].payload.length === results['wasm-simd'].payload.length &&
    results['js'].payload.every((b, i) => b === results['wasm-simd'].payload[i]);
  console.log(`wasm-simd and js payloads identical: ${same}`);
  if (!same) process.exitCode = 1;
}
