// Runs in headless Chromium: checks every backend bit-exact on the same inputs as the Node tests
// (generated here the same way), through the built browser bundles. window.runChecks(backend)
// returns a plain report the vitest side asserts on.
import { calibrateCodebook, createCodebook, encode } from '@splitzip/codec';
import { createKernels } from '@splitzip/kernels';

function createRandom(seed) {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
}

function allPatterns(seed) {
  const values = new Uint16Array(65536);
  for (let i = 0; i < 65536; i++) values[i] = i;
  const random = createRandom(seed);
  for (let i = values.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = values[i];
    values[i] = values[j];
    values[j] = t;
  }
  return values;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function modelLike(n, seed) {
  const random = createRandom(seed);
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(random(), 1e-12);
    const r = Math.sqrt(-2 * Math.log(u)) * 0.02;
    const a = 2 * Math.PI * random();
    f32[0] = r * Math.cos(a);
    values[i] = u32[0] >>> 16;
    if (i + 1 < n) {
      f32[0] = r * Math.sin(a);
      values[i + 1] = u32[0] >>> 16;
    }
  }
  return values;
}

function escapeHeavy(n, seed) {
  const random = createRandom(seed);
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i++) values[i] = Math.floor(random() * 65536);
  return values;
}

/** Scalar reference decoder from FORMAT.md (no shared code with the packages). */
function referenceDecode(payload) {
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const chunkSize = dv.getUint32(12, true);
  const n = Number(dv.getBigUint64(16, true));
  const chunkCount = dv.getUint32(32, true);
  const codebook = Array.from(payload.subarray(40, 40 + payload[36]));
  const at = (o) => Number(dv.getBigUint64(o, true));
  const [codesAt, smAt, indexAt, posAt, expAt] = [at(56), at(72), at(88), at(104), at(120)];
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const byte = payload[codesAt + Math.floor(i / 2)];
    const code = i % 2 === 0 ? byte & 15 : byte >> 4;
    const sm = payload[smAt + i];
    out[i] = ((sm & 0x80) << 8) | (codebook[code] << 7) | (sm & 0x7f);
  }
  for (let c = 0; c < chunkCount; c++) {
    for (let j = dv.getUint32(indexAt + 4 * c, true); j < dv.getUint32(indexAt + 4 * c + 4, true); j++) {
      const i = c * chunkSize + dv.getUint16(posAt + 2 * j, true);
      out[i] = (out[i] & 0x807f) | (payload[expAt + j] << 7);
    }
  }
  return out;
}

function firstMismatch(a, b) {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

function buildCases(largeCount) {
  const modelBook = calibrateCodebook(modelLike(1 << 16, 1)).codebook;
  const cases = [
    { name: 'all 65,536 patterns', values: allPatterns(7) },
    { name: 'all 65,536 patterns, model codebook (most escape)', values: allPatterns(3), codebook: modelBook },
    { name: 'model-like 100,003 values (odd)', values: modelLike(100003, 2) },
    { name: 'model-like 4,097 values, chunk 64', values: modelLike(4097, 5), chunkSize: 64 },
    { name: 'escape-heavy 30,001 values', values: escapeHeavy(30001, 13), codebook: modelBook },
    { name: 'escape-heavy 131,075 values, chunk 65536', values: escapeHeavy(131075, 9), codebook: modelBook, chunkSize: 65536 },
    { name: 'three values', values: new Uint16Array([0x3f80, 0xbf00, 0x0001]), codebook: createCodebook([127, 126, 0]) },
    { name: 'empty', values: new Uint16Array(0), codebook: createCodebook([127]) },
  ];
  if (largeCount > 0) {
    const large = modelLike(largeCount, 17);
    for (let i = 0; i < large.length; i += 4099) large[i] = (large[i] & 0x807f) | (250 << 7);
    cases.push({ name: `model-like ${largeCount} values (several launches)`, values: large });
  }
  for (const c of cases) {
    c.codebook ??= calibrateCodebook(c.values).codebook;
    c.options = c.chunkSize ? { chunkSize: c.chunkSize } : undefined;
    c.payload = encode(c.values, c.codebook, c.options);
  }
  return cases;
}

async function environment() {
  const canvas = document.createElement('canvas');
  const gl2 = canvas.getContext('webgl2');
  const adapter = navigator.gpu ? await navigator.gpu.requestAdapter() : null;
  const info = adapter ? adapter.info || {} : {};
  return {
    webgl2Renderer: gl2 ? gl2.getParameter(gl2.RENDERER) : null,
    webgpu: adapter ? { vendor: info.vendor, architecture: info.architecture, isFallbackAdapter: adapter.isFallbackAdapter } : null,
    crossOriginIsolated: self.crossOriginIsolated,
  };
}

/** Decode, decodeToDevice and encode on one backend; a list of failures (empty = all bit-exact). */
async function runChecks(backend, largeCount) {
  const report = { backend, env: await environment(), started: null, fallbackReason: null, checks: 0, failures: [] };
  const kernels = await createKernels({ backend });
  report.started = kernels.backend;
  report.fallbackReason = kernels.fallbackReason;
  try {
    for (const c of buildCases(largeCount)) {
      const expected = referenceDecode(c.payload);
      if (firstMismatch(expected, c.values) !== -1) report.failures.push(`${c.name}: reference disagrees with the input`);
      const decoded = await kernels.decode(c.payload);
      const wrong = firstMismatch(decoded.values, expected);
      report.checks++;
      if (decoded.backend !== backend) report.failures.push(`${c.name}: decode ran on ${decoded.backend} (${decoded.fallbackReason})`);
      if (wrong !== -1) report.failures.push(`${c.name}: decode differs at ${wrong}: ${decoded.values[wrong]} != ${expected[wrong]}`);

      const device = await kernels.decodeToDevice(c.payload);
      const back = await device.toArray();
      device.delete();
      report.checks++;
      if (device.backend !== backend) report.failures.push(`${c.name}: decodeToDevice ran on ${device.backend}`);
      const wrongDevice = firstMismatch(back, expected);
      if (wrongDevice !== -1) report.failures.push(`${c.name}: decodeToDevice differs at ${wrongDevice}`);
      report.location = device.location;

      const encoded = await kernels.encode(c.values, c.codebook, c.options);
      report.checks++;
      if (encoded.backend !== backend) report.failures.push(`${c.name}: encode ran on ${encoded.backend} (${encoded.fallbackReason})`);
      const wrongByte = firstMismatch(encoded.payload, c.payload);
      if (wrongByte !== -1) report.failures.push(`${c.name}: encode differs from the codec at byte ${wrongByte}`);
    }
  } finally {
    await kernels.dispose();
  }
  return report;
}

/** Median ms of `runs` calls after one warm-up. */
async function timeMedian(runs, fn) {
  await fn();
  const times = [];
  for (let r = 0; r < runs; r++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

/** Benchmark rows for bench/run-bench.mjs: decode and encode GB/s (BF16 bytes) next to a copy. */
async function runBench(backend, elementCount, runs) {
  const values = modelLike(elementCount, 23);
  const { codebook } = calibrateCodebook(values);
  const payload = encode(values, codebook);
  const kernels = await createKernels({ backend });
  try {
    const out = new Uint16Array(elementCount);
    const copy = new Uint16Array(elementCount);
    const copyMs = await timeMedian(runs, async () => copy.set(values));
    const decodeMs = await timeMedian(runs, async () => {
      const r = await kernels.decode(payload, out);
      if (r.backend !== backend) throw new Error(`decode ran on ${r.backend}: ${r.fallbackReason}`);
    });
    if (firstMismatch(out, values) !== -1) throw new Error('bench decode is not bit-exact');
    const deviceMs = await timeMedian(runs, async () => {
      const r = await kernels.decodeToDevice(payload);
      r.delete();
    });
    const encodeMs = await timeMedian(runs, async () => {
      const r = await kernels.encode(values, codebook);
      if (r.backend !== backend) throw new Error(`encode ran on ${r.backend}: ${r.fallbackReason}`);
    });
    return { backend, elementCount, copyMs, decodeMs, deviceMs, encodeMs, started: kernels.backend };
  } finally {
    await kernels.dispose();
  }
}

window.runChecks = runChecks;
window.runBench = runBench;
window.pageReady = true;
