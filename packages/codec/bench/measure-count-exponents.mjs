// countExponents benchmark (not a test): GB/s of BF16 input for the JS loop ('js' forced: the
// fallback, and what every backend ran before the wasm kernel) and the wasm kernel, on an ordinary
// Uint16Array (copied through the kernel's scratch block by block) and on a view in a codec arena
// (counted in place), on run-bench's 2^24 Gaussian tensor (sigma 0.02), single thread. Rounds
// interleave the three, so the ratios to the JS loop are from this run. Then the same at small
// sizes (a slice counted many times, in cache), where WASM_COUNT_MIN_VALUES hands over to wasm.
// Uses the built dist: `node bench/measure-count-exponents.mjs` (BENCH_LOG2_N, BENCH_RUNS).
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { countExponents, createCodecArena, getCodecBackend, setCodecBackend } from '../dist/index.js';
import { gaussianBf16 } from './gaussian-bf16.mjs';

const LOG2_N = Number(process.env.BENCH_LOG2_N ?? 24);
const N = 2 ** LOG2_N;
const RUNS = Number(process.env.BENCH_RUNS ?? 15);

const median = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
const once = (fn) => {
  const t0 = performance.now();
  fn();
  return (performance.now() - t0) / 1000;
};

const values = gaussianBf16(N, 0.02, 12345);
const arena = createCodecArena(2 * N + 4096);
const arenaValues = arena.allocateValues(N);
arenaValues.set(values);
setCodecBackend('auto');
const backend = getCodecBackend();

const rows = [
  ['js loop (setCodecBackend js)', 'js', values],
  [`${backend}, ordinary array`, 'auto', values],
  [`${backend}, arena view (in place)`, 'auto', arenaValues],
];
// Every row must give the JS loop's histogram.
setCodecBackend('js');
const expected = countExponents(values).join();
for (const [name, mode, input] of rows) {
  setCodecBackend(mode);
  if (countExponents(input).join() !== expected) throw new Error(`${name}: histogram differs from the JS loop's`);
}

const samples = rows.map(() => []);
const ratios = rows.map(() => []);
for (let r = -1; r < RUNS; r++) {
  const seconds = rows.map(([, mode, input]) => {
    setCodecBackend(mode);
    return once(() => countExponents(input));
  });
  if (r < 0) continue; // warm-up round
  seconds.forEach((s, i) => {
    samples[i].push(s);
    ratios[i].push(seconds[0] / s);
  });
}
setCodecBackend('auto');

const gbps = (bytes, s) => bytes / s / 1e9;
console.log(`countExponents: 2^${LOG2_N} Gaussian BF16 values (sigma 0.02), single thread, medians of ${RUNS} interleaved rounds`);
console.log(`node ${process.version}, automatic backend: ${backend}, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
console.log('');
console.log('| path | GB/s (BF16) | x JS loop (medians) | x JS loop (per round) |');
console.log('|---|---|---|---|');
const jsS = median(samples[0]);
rows.forEach(([name], i) => {
  const s = median(samples[i]);
  console.log(`| ${name} | ${gbps(2 * N, s).toFixed(2)} | ${(jsS / s).toFixed(2)} | ${median(ratios[i]).toFixed(2)} |`);
});

// Small inputs: the automatic path (the JS loop below WASM_COUNT_MIN_VALUES) against forced js.
console.log('');
console.log('| values | js loop (µs) | automatic, ordinary array (µs) | automatic, arena view (µs) |');
console.log('|---|---|---|---|');
for (const n of [64, 256, 1024, 4096, 65536]) {
  const calls = Math.max(50, Math.round(2 ** 22 / n));
  const perCall = (mode, input) => {
    setCodecBackend(mode);
    const view = input.subarray(0, n);
    const hist = new Uint32Array(256);
    for (let k = 0; k < calls; k++) countExponents(view, hist); // warm-up
    const batches = [];
    for (let b = 0; b < 7; b++) batches.push(once(() => { for (let k = 0; k < calls; k++) countExponents(view, hist); }) / calls);
    return median(batches) * 1e6;
  };
  const js = perCall('js', values);
  const plain = perCall('auto', values);
  const inArena = perCall('auto', arenaValues);
  console.log(`| ${n} | ${js.toFixed(2)} | ${plain.toFixed(2)} | ${inArena.toFixed(2)} |`);
}
setCodecBackend('auto');
