// Micro-measurement (not a test): the wasm kernels in cache, ns per 32-value group, for each
// checksum mode: decode without hashing, with format v1, v2 and v3 hashing fused, the hash-only
// loop (hash_groups) and encode with and without v3 hashing. One block of 32,768 values (48 KiB
// of codes + sm, 64 KiB of output: L2-resident), called many times; medians of batches.
// Reads the module from src/wasm/codec-wasm.generated.ts (run `pnpm build:wasm` after editing codec.wat).
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const source = readFileSync(new URL('../src/wasm/codec-wasm.generated.ts', import.meta.url), 'utf8');
const base64 = source
  .split('CODEC_WASM_SHARED_BASE64')[0]
  .match(/'([^']+)'/g)
  .map((s) => s.slice(1, -1))
  .join('');
const memory = new WebAssembly.Memory({ initial: 8, maximum: 8 });
const module = new WebAssembly.Module(Buffer.from(base64, 'base64'));
const ex = new WebAssembly.Instance(module, { env: { memory, base: new WebAssembly.Global({ value: 'i32', mutable: false }, 0) } }).exports;

const GROUPS = 1024;
const CODES = 4096;
const SM = CODES + 16 * GROUPS;
const OUT = SM + 32 * GROUPS;
const IN = OUT + 64 * GROUPS; // encode input: 64 bytes a group
const ESC_INDEX = IN + 64 * GROUPS;
const ESC_EXP = ESC_INDEX + 4 * 32 * GROUPS;
const u8 = new Uint8Array(memory.buffer);
const u16 = new Uint16Array(memory.buffer);
let seed = 1;
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) & 0xff;
// Decode table: 16 exponents 110..125, rotated right by one bit (codec.wat's layout).
for (let k = 0; k < 16; k++) u8[k] = ((110 + k) >>> 1) | (((110 + k) & 1) << 7);
// Encode table: one window of 16 exponents from 110.
for (let j = 0; j < 16; j++) {
  u8[1024 + j] = j + 1;
  u8[1040 + j] = 110;
}
for (let i = 0; i < 16 * GROUPS; i++) u8[CODES + i] = rand();
for (let i = 0; i < 32 * GROUPS; i++) u8[SM + i] = rand();
for (let i = 0; i < 32 * GROUPS; i++) u16[IN / 2 + i] = ((rand() & 0x80) << 8) | ((110 + (rand() & 15)) << 7) | (rand() & 0x7f);

const CALLS = 200;
const BATCHES = Number(process.env.KERNEL_BATCHES ?? 25);
function nsPerGroup(fn) {
  for (let k = 0; k < CALLS; k++) fn(); // warm-up (tier-up to the optimizing compiler)
  const batches = [];
  for (let b = 0; b < BATCHES; b++) {
    const t0 = performance.now();
    for (let k = 0; k < CALLS; k++) fn();
    batches.push(((performance.now() - t0) * 1e6) / (CALLS * GROUPS));
  }
  batches.sort((x, y) => x - y);
  return batches[batches.length >> 1];
}

const rows = [
  ['decode, no hashing', () => ex.decode(CODES, SM, OUT, GROUPS, 0)],
  ['decode + v1 hashing (codes; sm one chain)', () => ex.decode(CODES, SM, OUT, GROUPS, 1)],
  ['decode + v2 hashing (codes; sm even/odd)', () => ex.decode(CODES, SM, OUT, GROUPS, 2)],
  ['decode + v3 hashing (six chains, 2 groups/iteration)', () => ex.decode(CODES, SM, OUT, GROUPS, 3)],
  ['hash only, v2 (hash_groups 2)', () => ex.hash_groups(CODES, SM, GROUPS, 2)],
  ['hash only, v3 (hash_groups 3)', () => ex.hash_groups(CODES, SM, GROUPS, 3)],
  ['encode, no hashing', () => ex.encode(IN, CODES, SM, GROUPS, ESC_INDEX, ESC_EXP, 1, 0)],
  ['encode + v3 hashing', () => ex.encode(IN, CODES, SM, GROUPS, ESC_INDEX, ESC_EXP, 1, 1)],
];
console.log(`wasm kernels in cache: ${GROUPS} groups of 32 values a call, median of ${BATCHES} batches of ${CALLS} calls (node ${process.version})`);
console.log('');
console.log('| kernel | ns per 32 values | GB/s of BF16 output |');
console.log('|---|---|---|');
for (const [name, fn] of rows) {
  const ns = nsPerGroup(fn);
  console.log(`| ${name} | ${ns.toFixed(2)} | ${(64 / ns).toFixed(1)} |`);
}
