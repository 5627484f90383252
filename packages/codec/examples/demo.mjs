// SplitZip codec demo on built-in data (no downloads): a synthetic weight-like BF16 tensor and all
// 65,536 BF16 bit patterns. Calibrate, encode, decode, check bit-exact, print a table.
// Exits non-zero if anything mismatches. Run after building: node packages/codec/examples/demo.mjs
import { performance } from 'node:perf_hooks';
import { calibrateCodebook, decode, decodeRange, encode, getCodecBackend, readPayloadMeta } from '../dist/index.js';
import { gaussianBf16 } from '../bench/gaussian-bf16.mjs';

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
  { name: 'synthetic weights (sigma 0.02 + outliers)', values: gaussianBf16(1 << 22, 0.02, 2026, { outlierRate: 1e-4 }) },
  { name: 'all 65,536 BF16 bit patterns', values: allPatterns() },
];

let failures = 0;
const rows = [];
for (const { name, values } of tensors) {
  const { codebook, coverage, escapeCount } = calibrateCodebook(values);
  const payload = encode(values, codebook, { escapeCount });
  const meta = readPayloadMeta(payload);
  const decoded = decode(payload);
  let mismatches = 0;
  for (let i = 0; i < values.length; i++) if (decoded[i] !== values[i]) mismatches++;
  const mid = Math.floor(values.length / 3);
  const range = decodeRange(payload, mid, 1000, undefined, { verify: false });
  for (let i = 0; i < range.length; i++) if (range[i] !== values[mid + i]) mismatches++;
  failures += mismatches;
  const rawBytes = values.length * 2;
  const encodeS = bestOf(3, () => encode(values, codebook, { escapeCount }));
  // Into a reused buffer: no fresh pages to fault in (on a VM whose host backs memory lazily, that
  // costs more than the encode itself).
  const reused = new Uint8Array(payload.length);
  const encodeReusedS = bestOf(3, () => encode(values, codebook, { out: reused }));
  if (!reused.every((b, i) => b === payload[i])) failures++;
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
    encodeReusedOutGBps: (rawBytes / encodeReusedS / 1e9).toFixed(2),
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
