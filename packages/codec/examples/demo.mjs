// SplitZip codec demo on built-in data (no downloads): a synthetic weight-like BF16 tensor and all
// 65,536 BF16 bit patterns. Calibrate, encode, decode, check bit-exact, print a table.
// Exits non-zero if anything mismatches. Run after building: node packages/codec/examples/demo.mjs
import { performance } from 'node:perf_hooks';
import { calibrateCodebook, decode, decodeRange, encode, getCodecBackend, readPayloadMeta } from '../dist/index.js';

/** Deterministic Gaussian(0, sigma) BF16 bit patterns with a few large outliers, like real weights. */
function syntheticWeights(n, sigma, seed) {
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
    let x = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()) * sigma;
    if (rand() < 1e-4) x *= 500; // outliers
    f[0] = x;
    out[i] = (u[0] + 0x7fff + ((u[0] >>> 16) & 1)) >>> 16; // round to nearest even
  }
  return out;
}

function allPatterns() {
  return Uint16Array.from({ length: 65536 }, (_, i) => i);
}

function bestOf(runs, fn) {
  let best = Infinity;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    fn();
    best = Math.min(best, performance.now() - t0);
  }
  return best / 1000;
}

const tensors = [
  { name: 'synthetic weights (sigma 0.02 + outliers)', values: syntheticWeights(1 << 22, 0.02, 2026) },
  { name: 'all 65,536 BF16 bit patterns', values: allPatterns() },
];

let failures = 0;
const rows = [];
for (const { name, values } of tensors) {
  const { codebook, coverage } = calibrateCodebook(values);
  const payload = encode(values, codebook);
  const meta = readPayloadMeta(payload);
  const decoded = decode(payload);
  let mismatches = 0;
  for (let i = 0; i < values.length; i++) if (decoded[i] !== values[i]) mismatches++;
  const mid = Math.floor(values.length / 3);
  const range = decodeRange(payload, mid, 1000, undefined, { verify: false });
  for (let i = 0; i < range.length; i++) if (range[i] !== values[mid + i]) mismatches++;
  failures += mismatches;
  const rawBytes = values.length * 2;
  const encodeS = bestOf(3, () => encode(values, codebook));
  const out = new Uint16Array(values.length);
  const decodeS = bestOf(3, () => decode(payload, out));
  rows.push({
    tensor: name,
    values: values.length,
    rawBytes,
    payloadBytes: payload.length,
    ratio: (payload.length / rawBytes).toFixed(4),
    coverage: coverage.toFixed(6),
    escapes: meta.escapeCount,
    encodeGBps: (rawBytes / encodeS / 1e9).toFixed(2),
    decodeGBps: (rawBytes / decodeS / 1e9).toFixed(2),
    bitExact: mismatches === 0 ? 'yes' : `NO (${mismatches} mismatches)`,
  });
}

console.log(`SplitZip codec demo (backend: ${getCodecBackend()}, decode verifies the checksum)`);
const headers = Object.keys(rows[0]);
console.log(`| ${headers.join(' | ')} |`);
console.log(`|${headers.map(() => '---').join('|')}|`);
for (const row of rows) console.log(`| ${headers.map((h) => row[h]).join(' | ')} |`);
if (failures > 0) {
  console.error(`FAILED: ${failures} values differ after the round trip`);
  process.exit(1);
}
console.log('all round trips bit-exact');
