// How much memory bandwidth a second thread adds on this machine: a `TypedArray.set` copy between
// two buffers far beyond any cache, on the calling thread alone, then on the calling thread and a
// worker at once (each its own buffers), in alternating rounds. A decode of a large tensor moves
// about 3.5 bytes a value (1.5 read, 2 written), so where memory is the limit, the worker decoder's
// speed-up over one thread cannot exceed this ratio, whatever the decoder does. Run alone:
// node bench/measure-copy-scaling.mjs [rounds]
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/** Bytes per copy buffer: 64 MiB, well past the L3 of the machines measured. */
const COPY_BYTES = 64 * 2 ** 20;
/** Copies per timed run, so one run lasts a few milliseconds at tens of GB/s. */
const COPIES_PER_RUN = 4;

// The worker copies its own buffers on every message and answers with its time. Inline source
// (eval), so the bench needs no second file next to the built package.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const from = new Uint8Array(workerData.bytes).fill(1);
const to = new Uint8Array(workerData.bytes).fill(2);
parentPort.on('message', (copies) => {
  const t = performance.now();
  for (let k = 0; k < copies; k++) to.set(from);
  parentPort.postMessage(performance.now() - t);
});
parentPort.postMessage(0);
`;

const medianOf = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function copyRun(from, to) {
  const t = performance.now();
  for (let k = 0; k < COPIES_PER_RUN; k++) to.set(from);
  return performance.now() - t;
}

/**
 * { oneGBps, twoGBps, ratio }: read + write GB/s of copies on one thread, on two threads at once
 * (both threads' bytes over the slower thread's time), medians of `rounds` alternating rounds.
 */
export async function measureCopyScaling({ rounds = 7 } = {}) {
  const from = new Uint8Array(COPY_BYTES).fill(1);
  const to = new Uint8Array(COPY_BYTES).fill(2);
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { bytes: COPY_BYTES } });
  // One pending answer at a time; an error or exit fails it.
  let pending = null;
  const settle = (fn) => (value) => {
    const p = pending;
    pending = null;
    p?.[fn](value);
  };
  worker.on('message', settle('resolve'));
  worker.on('error', settle('reject'));
  worker.on('exit', () => settle('reject')(new Error('copy worker exited')));
  const reply = () => new Promise((resolve, reject) => (pending = { resolve, reject }));
  try {
    await reply();
    const bytesPerRun = 2 * COPY_BYTES * COPIES_PER_RUN;
    const one = [];
    const two = [];
    copyRun(from, to);
    for (let r = 0; r < rounds; r++) {
      one.push(bytesPerRun / copyRun(from, to) / 1e6);
      const answered = reply();
      worker.postMessage(COPIES_PER_RUN);
      const mine = copyRun(from, to);
      const theirs = await answered;
      two.push((2 * bytesPerRun) / Math.max(mine, theirs) / 1e6);
    }
    const oneGBps = medianOf(one);
    const twoGBps = medianOf(two);
    return { oneGBps, twoGBps, ratio: twoGBps / oneGBps };
  } finally {
    await worker.terminate();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { oneGBps, twoGBps, ratio } = await measureCopyScaling({ rounds: Number(process.argv[2] ?? 7) });
  console.log(`copy (read + write) one thread ${oneGBps.toFixed(1)} GB/s, two threads ${twoGBps.toFixed(1)} GB/s: ${ratio.toFixed(2)}x`);
}
