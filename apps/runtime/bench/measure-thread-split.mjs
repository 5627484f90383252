// One large tensor through the thread decoder, payload and output in a shared codec arena (as
// loadModel's staging pool places them): verified decode split over the threads by checksum
// segments (format v3) against the same decode fused on one thread and against a plain copy of
// the output bytes, in the same run. Usage: node bench/measure-thread-split.mjs [--log2 24] [--rounds 15]
import { calibrateCodebook, createCodecArena, decode, encode, readPayloadMeta } from '@splitzip/codec';
import { createThreadDecoder } from '@splitzip/runtime';
import { median } from './bench-helpers.mjs';

const arg = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const n = 2 ** arg('log2', 24);
const rounds = arg('rounds', 15);
const values = new Uint16Array(n);
let x = 12345;
for (let i = 0; i < n; i += 1) {
  x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
  // weight-like BF16: exponents 116..127 mostly, 0.3% anything
  values[i] = (x & 0xff) === 0 ? x >>> 16 : (x & 0x8000) | ((116 + ((x >>> 8) % 12)) << 7) | ((x >>> 20) & 0x7f);
}
const { codebook } = calibrateCodebook(values);
const encoded = encode(values, codebook);
const threads = 2;
const arena = createCodecArena(encoded.length + 4 * n + (1 << 20), { threads });
const payload = arena.allocate(encoded.length);
payload.set(encoded);
const out = arena.allocateValues(n);
const copyTarget = new Uint16Array(n);
const meta = readPayloadMeta(payload);
const split = createThreadDecoder({ threads });
const whole = createThreadDecoder({ threads, splitMinValues: Number.MAX_SAFE_INTEGER });
const ops = {
  'copy of the output bytes (baseline)': async () => copyTarget.set(values),
  'threads:2 split by segments, verified': () => split.decode(payload, meta, out, { verifyChecksum: true, arena }),
  'threads:2 whole on one thread, verified': () => whole.decode(payload, meta, out, { verifyChecksum: true, arena }),
  'calling thread decode, verified': async () => decode(payload, out),
  'threads:2 split by chunks, unverified': () => split.decode(payload, meta, out, { verifyChecksum: false, arena }),
};
const times = Object.fromEntries(Object.keys(ops).map((k) => [k, []]));
for (let r = 0; r < rounds; r += 1) {
  for (const [name, op] of Object.entries(ops)) {
    out.fill(0);
    const t0 = performance.now();
    await op();
    times[name].push(performance.now() - t0);
    if (name !== 'copy of the output bytes (baseline)' && Buffer.compare(Buffer.from(out.buffer, out.byteOffset, 2 * n), Buffer.from(values.buffer)) !== 0) {
      throw new Error(`${name}: output differs`);
    }
  }
}
const base = median(times['copy of the output bytes (baseline)']);
console.log(`| ${n} values, format v${meta.version}, ${rounds} rounds | median ms | GB/s of BF16 | vs copy |`);
console.log('|---|---|---|---|');
for (const name of Object.keys(ops)) {
  const ms = median(times[name]);
  console.log(`| ${name} | ${ms.toFixed(2)} | ${((2 * n) / ms / 1e6).toFixed(2)} | ${(base / ms).toFixed(2)}x |`);
}
await split.close();
await whole.close();
