// Runs on the H200 device machine (through run-h200.sh): checks the gpu.js WebGPU backend
// bit-exact under Dawn in Node and times decode per backend, split into stages, next to the
// codec's CPU path and a raw BF16 upload. Usage: node h200-bench.mjs smoke|full
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { calibrateCodebook, decode as codecDecode, encode as codecEncode, getCodecBackend, readPayloadMeta } from '@splitzip/codec';
import { createKernels, createWorkerDecoder, installNodeWebGpu } from '@splitzip/kernels';
import gpujs from 'gpu.js';
import { createRawWgslDecoder, uploadRawBf16 } from './raw-wgsl-decode.mjs';

const mode = process.argv[2] ?? 'smoke';
const now = () => performance.now();
const log = (...args) => console.log(...args);
const rows = [];
const checks = [];

function check(name, ok, detail = '') {
  checks.push({ name, ok });
  log(`${ok ? 'PASS' : 'FAIL'} ${name}${detail ? ` (${detail})` : ''}`);
}

function firstMismatch(a, b) {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/** Model-like BF16 weights (Gaussian, std 0.02), tiled from a 2^20 block, with rare exponents sprinkled in. */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function modelLike(n) {
  const blockLength = Math.min(n, 1 << 20);
  const block = new Uint16Array(blockLength);
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  for (let i = 0; i < blockLength; i++) {
    f32[0] = Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd()) * 0.02;
    block[i] = u32[0] >>> 16;
  }
  const values = new Uint16Array(n);
  for (let at = 0, k = 0; at < n; at += blockLength, k++) {
    values.set(block.subarray(0, Math.min(blockLength, n - at)), at);
    for (let i = at + (k % 89); i < Math.min(n, at + blockLength); i += 5003) values[i] = (values[i] & 0x807f) | ((248 - (k % 5)) << 7);
  }
  return values;
}

async function median(runs, fn) {
  await fn();
  const samples = [];
  for (let r = 0; r < runs; r++) samples.push(await fn());
  const key = (x) => (typeof x === 'number' ? x : x.totalMs);
  samples.sort((a, b) => key(a) - key(b));
  return samples[Math.floor(samples.length / 2)];
}

function addRow(n, path, t) {
  const total = typeof t === 'number' ? t : t.totalMs;
  const row = {
    elements: n,
    path,
    totalMs: total,
    gbPerSecond: (2 * n) / (total * 1e6),
    validateMs: t.validateMs ?? null,
    prepareMs: t.prepareMs ?? null,
    uploadMs: t.uploadMs ?? null,
    kernelMs: t.kernelMs ?? null,
    readbackMs: t.readbackMs ?? null,
  };
  rows.push(row);
  const f = (x) => (x === null || x === undefined ? '' : x.toFixed(1));
  log(
    `| 2^${Math.log2(n)} | ${path} | ${f(row.totalMs)} | ${row.gbPerSecond.toFixed(2)} | ${f(row.validateMs)} | ${f(row.prepareMs)} | ${f(row.uploadMs)} | ${f(row.kernelMs)} | ${f(row.readbackMs)} |`,
  );
}

log(`node ${process.version}, ${availableParallelism()} cores (${cpus()[0]?.model ?? '?'}), codec backend ${getCodecBackend()}`);
const status = await installNodeWebGpu();
log(`webgpu (Dawn) available: ${status.available}${status.reason ? `: ${status.reason}` : ''}`);
if (!status.available) process.exitCode = 1;

// Why the gpu.js patch exists: Dawn's binding and a plain-function onuncapturederror.
if (status.available) {
  const adapter = await navigator.gpu.requestAdapter();
  const info = adapter.info ?? {};
  log(`adapter: vendor=${info.vendor} architecture=${info.architecture} device=${info.device} description=${info.description}`);
  const probe = await adapter.requestDevice();
  try {
    probe.onuncapturederror = () => {};
    log('Dawn accepts a plain function for device.onuncapturederror (the patch is not needed on this Dawn)');
  } catch (error) {
    log(`Dawn rejects a plain function for device.onuncapturederror: ${error.message} (what the gpu.js patch skips)`);
  }
  probe.destroy();
}

const kernels = await createKernels({ backend: 'webgpu' });
log(`createKernels({ backend: 'webgpu' }): backend=${kernels.backend} fallbackReason=${kernels.fallbackReason}`);
check('webgpu backend started and passed its self-check', kernels.backend === 'webgpu', kernels.fallbackReason ?? '');
const device = status.available ? (await gpujs.WebGPUContext.acquire()).device : null;
const raw = device ? await createRawWgslDecoder(device) : null;
const workers = createWorkerDecoder();
const workers2 = createWorkerDecoder({ threads: 1 });
log(`worker decoder: ${workers.threads} workers + the calling thread`);

const sizes = mode === 'smoke' ? [2 ** 20] : [2 ** 20, 2 ** 24, 2 ** 26];
log('\n| size | path | total ms | GB/s (BF16) | validate | pack | upload | kernel | readback |');
log('|---|---|---|---|---|---|---|---|---|');
for (const n of sizes) {
  const runs = n >= 2 ** 26 ? 3 : 5;
  const values = modelLike(n);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);
  const meta = readPayloadMeta(payload);
  const out = new Uint16Array(n);
  const copy = new Uint16Array(n);

  addRow(n, 'typed-array copy (host)', await median(runs, async () => {
    const t = now();
    copy.set(values);
    return now() - t;
  }));
  addRow(n, 'codec, 1 thread', await median(runs, async () => {
    const t = now();
    codecDecode(payload, out);
    return now() - t;
  }));
  check(`codec decode 2^${Math.log2(n)}`, firstMismatch(out, values) === -1);
  // Worker decoder: payload and output already in shared memory (the zero-copy use), and from a
  // plain ArrayBuffer payload (copied into the decoder's shared staging buffer).
  const sharedPayload = new Uint8Array(new SharedArrayBuffer(payload.length));
  sharedPayload.set(payload);
  const sharedOut = new Uint16Array(new SharedArrayBuffer(2 * n));
  for (const [label, decoder, input, verify] of [
    [`codec + ${workers.threads} workers + caller, shared payload`, workers, sharedPayload, true],
    ['codec + 1 worker + caller (2 threads), shared payload', workers2, sharedPayload, true],
    ['codec + 1 worker + caller (2 threads), payload copied in', workers2, payload, true],
    ['codec + 1 worker + caller (2 threads), shared, no checksum', workers2, sharedPayload, false],
  ]) {
    sharedOut.fill(0);
    addRow(n, label, await median(runs, async () => {
      const t = now();
      await decoder.decode(input, sharedOut, { verify });
      return now() - t;
    }));
    check(`${label} 2^${Math.log2(n)}`, firstMismatch(sharedOut, values) === -1);
  }
  addRow(n, 'codec, 1 thread, no checksum', await median(runs, async () => {
    const t = now();
    codecDecode(payload, out, { verify: false });
    return now() - t;
  }));

  if (kernels.backend === 'webgpu') {
    out.fill(0);
    const e2e = await median(runs, async () => (await kernels.decode(payload, out)).timings);
    addRow(n, 'webgpu (gpu.js) end-to-end', e2e);
    check(`webgpu decode 2^${Math.log2(n)} bit-exact`, firstMismatch(out, values) === -1);
    const dev = await median(runs, async () => {
      const r = await kernels.decodeToDevice(payload);
      r.delete();
      return r.timings;
    });
    addRow(n, 'webgpu (gpu.js) device-resident', dev);
    const kept = await kernels.decodeToDevice(payload);
    check(`webgpu decodeToDevice 2^${Math.log2(n)} read back bit-exact (${kept.segments.length} launches)`, firstMismatch(await kept.toArray(), values) === -1);
    kept.delete();
    const encoded = await kernels.encode(values, codebook);
    check(`webgpu encode 2^${Math.log2(n)} = codec bytes`, encoded.backend === 'webgpu' && firstMismatch(encoded.payload, payload) === -1);
    addRow(n, 'webgpu (gpu.js) encode', await median(runs, async () => (await kernels.encode(values, codebook)).timings));
    addRow(n, 'codec encode, 1 thread', await median(runs, async () => {
      const t = now();
      codecEncode(values, codebook);
      return now() - t;
    }));
  }
  if (device) {
    addRow(n, 'raw BF16 upload (writeBuffer, 2 B/value)', await median(runs, () => uploadRawBf16(device, values)));
    let last;
    const rawDev = await median(runs, async () => {
      const r = await raw.decodeToDevice(payload, meta);
      last?.output.destroy();
      last = r;
      return { totalMs: r.uploadMs + r.kernelMs, uploadMs: r.uploadMs, kernelMs: r.kernelMs };
    });
    addRow(n, 'raw WGSL reference (not gpu.js) device-resident', rawDev);
    const t = now();
    const back = await raw.readBack(last.output, n);
    const readMs = now() - t;
    addRow(n, 'raw WGSL reference (not gpu.js) end-to-end', { ...rawDev, totalMs: rawDev.totalMs + readMs, readbackMs: readMs });
    check(`raw WGSL decode 2^${Math.log2(n)} bit-exact`, firstMismatch(back, values) === -1);
    last.output.destroy();
  }
  if (mode === 'full' && n <= 2 ** 24) {
    for (const backend of ['webasm', 'cpu']) {
      const k = await createKernels({ backend });
      const r = await median(3, async () => (await k.decode(payload, out)).timings);
      addRow(n, `${backend} (gpu.js) end-to-end`, r);
      check(`${backend} decode 2^${Math.log2(n)}`, firstMismatch(out, values) === -1);
      await k.dispose();
    }
  }
}

await kernels.dispose();
await workers.dispose();
await workers2.dispose();
raw?.destroy();
const failed = checks.filter((c) => !c.ok).length;
log(`\n${checks.length - failed} checks passed, ${failed} failed`);
if (failed > 0) process.exitCode = 1;
if (process.env.OUT) writeFileSync(`${process.env.OUT}/h200-${mode}.json`, JSON.stringify({ mode, rows, checks }, null, 1));
// Dawn's instance keeps Node's event loop alive after its last use (seen on the H200): exit.
process.exit(process.exitCode ?? 0);
