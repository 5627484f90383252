// Decode and encode throughput per backend available here, next to a typed-array copy of the same
// size measured in the same run (machines are noisy: read the ratios). Node backends run in this
// process; the browser backends run in headless Chromium on SwiftShader (software rendering, so
// their numbers say nothing about a real GPU). Usage: node bench/run-bench.mjs [--quick]
// Headline rows (the worker-decoder target, codec throughput) go to <repo>/.cache/bench for
// `pnpm bench`'s summary; --quick (one run at 2^24) is a smoke run and writes none.
import { existsSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { writeBenchSummary } from '@splitzip/bench-utils';
import { calibrateCodebook, decode as codecDecode, encode as codecEncode, getCodecBackend } from '@splitzip/codec';
import { createKernels } from '../dist/node.js';
import { measureWorkerDecoder, modelLikeValues } from './measure-worker-decoder.mjs';
import { CHROMIUM_PATH, openTestPage, startPageServer, withTimeout } from '../test/browser/harness.mjs';

const quick = process.argv.includes('--quick');
const SIZES = [2 ** 20, 2 ** 24];
const now = () => performance.now();
const rows = [];

const modelLike = modelLikeValues;

async function median(runs, fn) {
  await fn();
  const times = [];
  for (let r = 0; r < runs; r++) {
    const t = now();
    await fn();
    times.push(now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

const gbps = (n, ms) => (2 * n) / (ms * 1e6);
function report(platform, backend, n, copyMs, decodeMs, encodeMs, deviceMs = null) {
  const row = { platform, backend, elementCount: n, copyMs, decodeMs, encodeMs, deviceMs };
  rows.push(row);
  const cell = (ms) => (ms === null ? '—' : `${gbps(n, ms).toFixed(2)} (${(copyMs / ms).toFixed(2)}x copy)`);
  console.log(`| ${platform} | ${backend} | 2^${Math.log2(n)} | ${gbps(n, copyMs).toFixed(2)} | ${cell(decodeMs)} | ${cell(deviceMs)} | ${cell(encodeMs)} |`);
}

console.log(
  `node ${process.version}, ${availableParallelism()} cores, codec backend ${getCodecBackend()}${quick ? ', --quick' : ''}, ` +
    `load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`,
);
console.log('GB/s of BF16 (2 bytes per value), medians; "x copy" = typed-array copy time / this time, same run.\n');
console.log('| platform | backend | size | copy GB/s | decode | decodeToDevice | encode |');
console.log('|---|---|---|---|---|---|---|');

// --- Node ---
for (const n of SIZES) {
  const runs = n >= 2 ** 24 ? (quick ? 1 : 3) : 7;
  const values = modelLike(n);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);
  const copy = new Uint16Array(n);
  const copyMs = await median(runs, () => copy.set(values));
  const out = new Uint16Array(n);
  report('node', 'codec', n, copyMs, await median(runs, () => codecDecode(payload, out)), await median(runs, () => codecEncode(values, codebook)));
  for (const backend of ['webasm', 'cpu']) {
    if (quick && n > 2 ** 20) continue;
    const kernels = await createKernels({ backend });
    if (kernels.backend !== backend) throw new Error(`${backend} did not start: ${kernels.fallbackReason}`);
    const r = Math.min(runs, 3);
    const decodeMs = await median(r, () => kernels.decode(payload, out));
    const deviceMs = await median(r, async () => (await kernels.decodeToDevice(payload)).delete());
    const encodeMs = await median(r, () => kernels.encode(values, codebook));
    report('node', backend, n, copyMs, decodeMs, encodeMs, deviceMs);
    await kernels.dispose();
  }
}

// --- the worker-thread decoder against one thread (bench/measure-worker-decoder.mjs) ---
console.log('');
const workerRows = await measureWorkerDecoder({ sizes: quick ? [2 ** 24] : [...SIZES, 2 ** 26], rounds: quick ? 3 : 15 });
console.log('');

// --- headless Chromium, SwiftShader (software) ---
if (!existsSync(CHROMIUM_PATH)) {
  console.log(`\nbrowser rows skipped: no Chromium at ${CHROMIUM_PATH} (scripts/install-browser.sh)`);
} else {
  const server = await startPageServer();
  const session = await openTestPage(server.url);
  try {
    for (const n of SIZES) {
      for (const backend of ['codec', 'webgpu', 'webgl2', 'webgl', 'webasm', 'cpu']) {
        if (quick && n > 2 ** 20 && backend !== 'codec') continue;
        const runs = n >= 2 ** 24 ? 1 : 5;
        const r = await withTimeout(
          session.page.evaluate(([b, size, k]) => window.runBench(b, size, k), [backend, n, runs]),
          150_000,
          `runBench(${backend}, ${n})`,
        );
        const label = backend === 'codec' || backend === 'webasm' || backend === 'cpu' ? backend : `${backend} (SwiftShader, software)`;
        report('chromium', label, n, r.copyMs, r.decodeMs, r.encodeMs, r.deviceMs);
      }
    }
  } finally {
    await session.close();
    await server.close();
  }
}
if (process.env.BENCH_JSON) {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(process.env.BENCH_JSON, JSON.stringify(rows, null, 1));
}

// Headline rows for the root summary, from this run's medians at 2^24 values.
if (!quick) {
  const HEADLINE_N = 2 ** 24;
  const WORKER_TARGET = 1.7;
  const at = (platform, backend) => rows.find((r) => r.platform === platform && r.elementCount === HEADLINE_N && backend(r.backend));
  const codec = at('node', (b) => b === 'codec');
  const copyNote = `copy ${gbps(HEADLINE_N, codec.copyMs).toFixed(2)} GB/s`;
  const load = `load average ${loadavg()[0].toFixed(2)} on ${availableParallelism()} cores`;
  // Judged per kind of buffer and checksum work, each against one thread doing the same (same run).
  const workerSummary = workerRows
    .filter((r) => r.elementCount === HEADLINE_N && r.arrays !== 'ordinary')
    .map((r) => ({
      metric: `worker decoder vs one thread, 2^24 values, ${r.arrays}, checksum ${r.checksum}`,
      value: r.ratio,
      unit: 'x',
      baseline: `codec decode of the same arrays, one thread ${gbps(HEADLINE_N, r.oneMs).toFixed(2)} GB/s`,
      target: `>= ${WORKER_TARGET}x on 2 cores`,
      met: r.ratio >= WORKER_TARGET,
      note: `${r.label}, ${gbps(HEADLINE_N, r.workersMs).toFixed(2)} GB/s, ${load}; copies on 2 threads ${r.copyScaling.toFixed(2)}x 1 thread`,
    }));
  const summaryRows = [
    ...workerSummary,
    {
      metric: 'codec decode (Node), 2^24 values',
      value: gbps(HEADLINE_N, codec.decodeMs),
      unit: 'GB/s',
      baseline: copyNote,
      note: `${(codec.copyMs / codec.decodeMs).toFixed(2)}x copy`,
    },
    {
      metric: 'codec encode (Node), 2^24 values',
      value: gbps(HEADLINE_N, codec.encodeMs),
      unit: 'GB/s',
      baseline: copyNote,
      note: `${(codec.copyMs / codec.encodeMs).toFixed(2)}x copy`,
    },
  ];
  const pageCodec = at('chromium', (b) => b === 'codec');
  const pageWebgpu = at('chromium', (b) => b.startsWith('webgpu'));
  summaryRows.push({
    metric: 'webgpu end-to-end decode vs the CPU path, 2^24 values',
    value: pageCodec && pageWebgpu ? pageCodec.decodeMs / pageWebgpu.decodeMs : null,
    unit: 'x',
    baseline: pageCodec ? `codec in the page ${gbps(HEADLINE_N, pageCodec.decodeMs).toFixed(2)} GB/s` : 'no Chromium here',
    target: '>= 1x',
    // SwiftShader is a software renderer: its GPU numbers cannot judge a GPU target.
    met: null,
    note: 'Chromium on SwiftShader (software), not judged; real GPU: device/run-h200.sh (RESULTS.md)',
  });
  summaryRows.push({
    metric: 'device-resident decode vs raw BF16 upload, 2^26 values',
    value: null,
    unit: 'x',
    target: '> 1x',
    met: null,
    note: 'not measured by this bench: needs a GPU, device/run-h200.sh (RESULTS.md)',
  });
  writeBenchSummary({
    packageName: '@splitzip/kernels',
    title: 'decode/encode per backend vs a typed-array copy',
    environment: { codecBackend: getCodecBackend(), workerThreads: workerRows[0].label },
    rows: summaryRows,
  });
}