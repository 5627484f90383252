// Decode and encode throughput per backend available here, next to a typed-array copy of the same
// size measured in the same run (machines are noisy: read the ratios). Node backends run in this
// process; the browser backends run in headless Chromium on SwiftShader (software rendering, so
// their numbers say nothing about a real GPU). Usage: node bench/run-bench.mjs [--quick]
// Headline rows (the worker-decoder target, codec throughput) go to <repo>/.cache/bench for
// `pnpm bench`'s summary; --quick (one run at 2^24) is a smoke run and writes none.
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { writeBenchSummary } from '@splitzip/bench-utils';
import { calibrateCodebook, decode as codecDecode, encode as codecEncode, getCodecBackend } from '@splitzip/codec';
import { createKernels, createWorkerDecoder } from '../dist/node.js';
import { CHROMIUM_PATH, openTestPage, startPageServer, withTimeout } from '../test/browser/harness.mjs';

const quick = process.argv.includes('--quick');
const SIZES = [2 ** 20, 2 ** 24];
const now = () => performance.now();
const rows = [];

function modelLike(n) {
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

console.log(`node ${process.version}, ${availableParallelism()} cores, codec backend ${getCodecBackend()}${quick ? ', --quick' : ''}`);
console.log('GB/s of BF16 (2 bytes per value), medians; "x copy" = typed-array copy time / this time, same run.\n');
console.log('| platform | backend | size | copy GB/s | decode | decodeToDevice | encode |');
console.log('|---|---|---|---|---|---|---|');

// --- Node ---
const workers = createWorkerDecoder();
for (const n of SIZES) {
  const runs = n >= 2 ** 24 ? (quick ? 1 : 3) : 7;
  const values = modelLike(n);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);
  const copy = new Uint16Array(n);
  const copyMs = await median(runs, () => copy.set(values));
  const out = new Uint16Array(n);
  report('node', 'codec', n, copyMs, await median(runs, () => codecDecode(payload, out)), await median(runs, () => codecEncode(values, codebook)));
  const sharedPayload = new Uint8Array(new SharedArrayBuffer(payload.length));
  sharedPayload.set(payload);
  const sharedOut = new Uint16Array(new SharedArrayBuffer(2 * n));
  const workerMs = await median(runs, () => workers.decode(sharedPayload, sharedOut));
  report('node', `codec + ${workers.threads} worker(s) + caller`, n, copyMs, workerMs, null);
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
await workers.dispose();

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
  const pool = at('node', (b) => b.startsWith('codec + '));
  const copyNote = `copy ${gbps(HEADLINE_N, codec.copyMs).toFixed(2)} GB/s`;
  const summaryRows = [
    {
      metric: 'worker decoder vs one thread, 2^24 values',
      value: codec.decodeMs / pool.decodeMs,
      unit: 'x',
      baseline: `codec decode, one thread ${gbps(HEADLINE_N, codec.decodeMs).toFixed(2)} GB/s`,
      target: `>= ${WORKER_TARGET}x on 2 cores`,
      met: codec.decodeMs / pool.decodeMs >= WORKER_TARGET,
      note: `${pool.backend}, ${gbps(HEADLINE_N, pool.decodeMs).toFixed(2)} GB/s, ${availableParallelism()} cores`,
    },
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
    environment: { codecBackend: getCodecBackend(), workerThreads: pool.backend },
    rows: summaryRows,
  });
}