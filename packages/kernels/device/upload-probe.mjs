// Runs on the H200 device machine (run-h200.sh probe): why the webgpu decoder's host upload is
// slower per byte than the raw pieced upload, and slower again from shared memory (issue #4).
// Times, in alternating rounds (medians), 96 MiB copied from an ordinary ArrayBuffer, a
// SharedArrayBuffer and a shared codec arena (WebAssembly.Memory): into an ordinary array and
// into one kept mapped GPUBuffer range (host copy only), and as the whole pieced upload (kept
// mapped staging pieces of 4/16/32 MiB, each copied to a storage buffer on the device); with
// several copy primitives. Then the decoder itself with each source, piece size and slice size.
// Usage: node upload-probe.mjs
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { calibrateCodebook, createCodecArena, encode as codecEncode } from '@splitzip/codec';
import { createKernels, defaultChecksumThreads, installNodeWebGpu } from '@splitzip/kernels';
import gpujs from 'gpu.js';
import { createRawBf16Uploader } from './raw-bf16-upload.mjs';

const log = (...args) => console.log(...args);
const now = () => performance.now();
const MiB = 1 << 20;
const BYTES = 96 * MiB;
const USAGE = { MAP_WRITE: 0x2, COPY_SRC: 0x4, COPY_DST: 0x8, STORAGE: 0x80 };
const rows = [];

log(`node ${process.version}, ${availableParallelism()} cores (${cpus()[0]?.model ?? '?'})`);
const status = await installNodeWebGpu();
if (!status.available) {
  log(`webgpu unavailable: ${status.reason}`);
  process.exit(1);
}
const device = (await gpujs.WebGPUContext.acquire()).device;

const fill = (u8) => {
  const u32 = new Uint32Array(u8.buffer, u8.byteOffset, u8.length / 4);
  for (let i = 0; i < u32.length; i++) u32[i] = Math.imul(i, 2654435761) >>> 0;
  return u8;
};
const probeArena = createCodecArena(BYTES + MiB, { threads: 1 });
const sources = {
  ordinary: fill(new Uint8Array(BYTES)),
  sab: fill(new Uint8Array(new SharedArrayBuffer(BYTES))),
  arena: fill(probeArena.allocate(BYTES)),
};

const bounces = new Map();
const bounceOf = (bytes) => {
  if (!bounces.has(bytes)) bounces.set(bytes, fill(new Uint8Array(bytes)));
  return bounces.get(bytes);
};
const bounced = (bytes) => (dst, src) => {
  const b = bounceOf(bytes);
  for (let o = 0; o < src.length; o += bytes) {
    const n = Math.min(bytes, src.length - o);
    const step = n === bytes ? b : b.subarray(0, n);
    step.set(src.subarray(o, o + n));
    dst.set(step, o);
  }
};
const PRIMITIVES = {
  'set': (dst, src) => dst.set(src),
  'Float64Array set': (dst, src) => new Float64Array(dst.buffer, dst.byteOffset, dst.length / 8).set(new Float64Array(src.buffer, src.byteOffset, src.length / 8)),
  'BigUint64Array set': (dst, src) => new BigUint64Array(dst.buffer, dst.byteOffset, dst.length / 8).set(new BigUint64Array(src.buffer, src.byteOffset, src.length / 8)),
  'Buffer.copy': (dst, src) => Buffer.from(src.buffer, src.byteOffset, src.length).copy(dst, 0),
  'bounce 256 KiB': bounced(256 << 10),
  'bounce 1 MiB': bounced(MiB),
  'bounce 4 MiB': bounced(4 * MiB),
};

// Destinations of the host-only copies: an ordinary array, and one kept mapped staging range.
const ordinaryTarget = fill(new Uint8Array(BYTES));
const mappedBuffer = device.createBuffer({ size: BYTES, usage: USAGE.MAP_WRITE | USAGE.COPY_SRC, mappedAtCreation: true });
const mappedTarget = new Uint8Array(mappedBuffer.getMappedRange(0, BYTES));
mappedTarget.fill(1);

// The pieced upload, as raw-bf16-upload.mjs's kept-staging method, with any piece size and primitive.
const target = device.createBuffer({ size: BYTES, usage: USAGE.STORAGE | USAGE.COPY_DST });
const piecesBySize = new Map();
async function piecedUpload(source, pieceBytes, copy) {
  if (!piecesBySize.has(pieceBytes)) piecesBySize.set(pieceBytes, []);
  const pieces = piecesBySize.get(pieceBytes);
  const t = now();
  let hostMs = 0;
  for (let k = 0, at = 0; at < source.length; k++, at += pieceBytes) {
    const size = Math.min(pieceBytes, source.length - at);
    let piece = pieces[k];
    if (!piece || !(await piece.mapped)) {
      piece = { buffer: device.createBuffer({ size: pieceBytes, usage: USAGE.MAP_WRITE | USAGE.COPY_SRC, mappedAtCreation: true }), mapped: null };
      pieces[k] = piece;
    }
    const c = now();
    copy(new Uint8Array(piece.buffer.getMappedRange(0, size)), source.subarray(at, at + size));
    hostMs += now() - c;
    piece.buffer.unmap();
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(piece.buffer, 0, target, at, size);
    device.queue.submit([encoder.finish()]);
    const kept = piece.buffer;
    piece.mapped = kept.mapAsync(0x2).then(() => true, () => false);
  }
  await device.queue.onSubmittedWorkDone();
  return { totalMs: now() - t, hostMs };
}

/** Runs every case once per round, `rounds` rounds after one warm-up round; prints medians. */
async function alternate(title, cases, rounds) {
  try {
    await alternateUnguarded(title, cases, rounds);
  } catch (error) {
    log(`FAIL ${title}: ${error?.stack ?? error}`);
  }
}
async function alternateUnguarded(title, cases, rounds) {
  log(`\n### ${title}\n\n| case | median ms | GB/s | min ms | max ms | host copy ms (median) |\n|---|---|---|---|---|---|`);
  const samples = cases.map(() => []);
  for (let round = -1; round < rounds; round++) {
    for (const [i, [, fn]] of cases.entries()) {
      const r = await fn();
      if (round >= 0) samples[i].push(typeof r === 'number' ? { totalMs: r } : r);
    }
  }
  for (const [i, [label, , bytes]] of cases.entries()) {
    const list = samples[i];
    const by = (key) => list.map((s) => s[key]).filter((x) => x !== undefined).sort((a, b) => a - b);
    const total = by('totalMs');
    const mid = total[Math.floor(total.length / 2)];
    const host = by('hostMs');
    const upload = by('uploadMs');
    const prepare = by('prepareMs');
    const med = (list) => list[Math.floor(list.length / 2)].toFixed(1);
    const extra = host.length ? med(host) : upload.length ? `upload ${med(upload)}, launches recorded ${med(prepare)}, validate ${med(by('validateMs'))}` : '';
    rows.push({ title, label, medianMs: mid, minMs: total[0], maxMs: total.at(-1), extra });
    log(`| ${label} | ${mid.toFixed(1)} | ${((bytes ?? BYTES) / (mid * 1e6)).toFixed(2)} | ${total[0].toFixed(1)} | ${total.at(-1).toFixed(1)} | ${extra} |`);
  }
}

const timed = (fn) => () => {
  const t = now();
  fn();
  return now() - t;
};

// 1. Host copies, 96 MiB, into an ordinary array and into a kept mapped range.
const hostCases = [];
for (const [dstName, dst] of [['ordinary array', ordinaryTarget], ['mapped range', mappedTarget]]) {
  for (const [srcName, src] of Object.entries(sources)) {
    for (const [primName, prim] of Object.entries(PRIMITIVES)) {
      if (srcName === 'ordinary' && primName.startsWith('bounce') && primName !== 'bounce 1 MiB') continue;
      hostCases.push([`${srcName} -> ${dstName}, ${primName}`, timed(() => prim(dst, src))]);
    }
  }
  // Not pre-touched: a fresh source each time (its pages are first read during the copy).
  hostCases.push([`fresh ordinary (untouched) -> ${dstName}, set`, () => {
    const src = new Uint8Array(BYTES);
    const t = now();
    dst.set(src);
    return now() - t;
  }]);
  hostCases.push([`fresh sab (untouched) -> ${dstName}, set`, () => {
    const src = new Uint8Array(new SharedArrayBuffer(BYTES));
    const t = now();
    dst.set(src);
    return now() - t;
  }]);
  // Misaligned by 4 bytes: V8's relaxed copy falls back to bytes when source and target disagree mod 8.
  hostCases.push([`sab +4 bytes -> ${dstName}, set (misaligned)`, timed(() => dst.subarray(0, BYTES - 8).set(sources.sab.subarray(4, BYTES - 4)))]);
}
await alternate('host copies of 96 MiB (no device work)', hostCases, 7);

// 2. The whole pieced upload (kept mapped staging, device copies), 96 MiB.
const uploadCases = [];
for (const pieceMiB of [4, 16, 32]) {
  for (const [srcName, src] of Object.entries(sources)) {
    for (const primName of ['set', 'Float64Array set', 'bounce 256 KiB', 'bounce 1 MiB', 'bounce 4 MiB']) {
      if (srcName === 'ordinary' && primName !== 'set' && primName !== 'bounce 1 MiB') continue;
      if (pieceMiB !== 16 && primName !== 'set' && primName !== 'bounce 1 MiB') continue;
      uploadCases.push([`${pieceMiB} MiB pieces, ${srcName}, ${primName}`, () => piecedUpload(src, pieceMiB * MiB, PRIMITIVES[primName])]);
    }
  }
}
await alternate('pieced uploads of 96 MiB (kept mapped staging + device copies, until the queue drained)', uploadCases, 9);

// 3. The decoder itself, 2^26 values, next to the raw pieced upload of the BF16 tensor (128 MiB).
const n = 2 ** 26;
const values = new Uint16Array(n);
{
  let s = 12345;
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  const block = new Uint16Array(1 << 20);
  for (let i = 0; i < block.length; i++) {
    f32[0] = Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd()) * 0.02;
    block[i] = u32[0] >>> 16;
  }
  for (let at = 0, k = 0; at < n; at += block.length, k++) {
    values.set(block, at);
    for (let i = at + (k % 89); i < at + block.length; i += 5003) values[i] = (values[i] & 0x807f) | ((248 - (k % 5)) << 7);
  }
}
const payload = codecEncode(values, calibrateCodebook(values).codebook);
log(`\npayload: ${payload.length} bytes for ${2 * n} bytes of BF16`);
const sabPayload = new Uint8Array(new SharedArrayBuffer(payload.length));
sabPayload.set(payload);
const threads = defaultChecksumThreads();
const decoders = [];
const decoderOf = async (label, webgpu, withArena) => {
  const arena = withArena ? createCodecArena(payload.length + MiB, { threads }) : null;
  const kernels = await createKernels({ backend: 'webgpu', webgpu: arena ? { ...webgpu, arena } : webgpu });
  if (kernels.backend !== 'webgpu') throw new Error(`${label}: ${kernels.fallbackReason}`);
  decoders.push(kernels);
  const slot = arena ? arena.allocate(payload.length) : null;
  slot?.set(payload);
  return { kernels, slot };
};
const plain = await decoderOf('plain', {}, false);
const plain4 = await decoderOf('plain 4', { uploadPieceBytes: 4 * MiB }, false);
const plain32 = await decoderOf('plain 32', { uploadPieceBytes: 32 * MiB }, false);
const plainFresh = await decoderOf('plain, new bind groups', { reuseBindGroups: false }, false);
const arenaFresh = await decoderOf('arena, new bind groups', { reuseBindGroups: false }, true);
const plain2e24 = await decoderOf('plain 2^24 slices', { sliceElements: 2 ** 24 }, false);
const arena16 = await decoderOf('arena 16', {}, true);
const arena4 = await decoderOf('arena 4', { uploadPieceBytes: 4 * MiB }, true);
const arena32 = await decoderOf('arena 32', { uploadPieceBytes: 32 * MiB }, true);
const arena2e23 = await decoderOf('arena 2^23 slices', { sliceElements: 2 ** 23 }, true);
const arena2e24 = await decoderOf('arena 2^24 slices', { sliceElements: 2 ** 24 }, true);
const uploader = createRawBf16Uploader(device);
const call = (d, p, verify) => async () => {
  const r = await d.kernels.decodeToDevice(p, { verify });
  r.delete();
  if (r.backend !== 'webgpu') throw new Error(`ran on ${r.backend}`);
  return r.timings;
};
const decoderCases = [
  ['raw BF16 upload, kept staging, 16 MiB pieces (128 MiB)', () => uploader.upload(values, 'mapped staging (kept), 16 MiB pieces + copies'), 2 * n],
  ['decoder, ordinary payload, 16 MiB pieces, verify: false', call(plain, payload, false), 2 * n],
  ['decoder, ordinary payload, 4 MiB pieces, verify: false', call(plain4, payload, false), 2 * n],
  ['decoder, ordinary payload, 32 MiB pieces, verify: false', call(plain32, payload, false), 2 * n],
  ['decoder, ordinary payload, 16 MiB pieces, verified (main thread)', call(plain, payload, true), 2 * n],
  [`decoder, SharedArrayBuffer payload, 16 MiB, verify: false`, call(plain, sabPayload, false), 2 * n],
  ['decoder, arena payload, 16 MiB pieces, verify: false', call(arena16, arena16.slot, false), 2 * n],
  ['decoder, arena payload, 4 MiB pieces, verify: false', call(arena4, arena4.slot, false), 2 * n],
  ['decoder, arena payload, 32 MiB pieces, verify: false', call(arena32, arena32.slot, false), 2 * n],
  [`decoder, arena payload, 16 MiB pieces, verified (${threads} workers)`, call(arena16, arena16.slot, true), 2 * n],
  [`decoder, arena payload, 4 MiB pieces, verified (${threads} workers)`, call(arena4, arena4.slot, true), 2 * n],
  [`decoder, arena payload, 32 MiB pieces, verified (${threads} workers)`, call(arena32, arena32.slot, true), 2 * n],
  ['decoder, ordinary payload, reuseBindGroups: false, verify: false', call(plainFresh, payload, false), 2 * n],
  ['decoder, arena payload, reuseBindGroups: false, verify: false', call(arenaFresh, arenaFresh.slot, false), 2 * n],
  [`decoder, arena payload, reuseBindGroups: false, verified (${threads} workers)`, call(arenaFresh, arenaFresh.slot, true), 2 * n],
  ['decoder, ordinary payload, 2^24-value slices, verify: false', call(plain2e24, payload, false), 2 * n],
  ['decoder, arena payload, 2^23-value slices, verify: false', call(arena2e23, arena2e23.slot, false), 2 * n],
  ['decoder, arena payload, 2^24-value slices, verify: false', call(arena2e24, arena2e24.slot, false), 2 * n],
  [`decoder, arena payload, 2^23-value slices, verified (${threads} workers)`, call(arena2e23, arena2e23.slot, true), 2 * n],
  [`decoder, arena payload, 2^24-value slices, verified (${threads} workers)`, call(arena2e24, arena2e24.slot, true), 2 * n],
];
await alternate(`decoder, 2^26 values (GB/s of BF16); last column: its stages (medians)`, decoderCases, 9);

for (const k of decoders) await k.dispose();
uploader.destroy();
if (process.env.OUT) writeFileSync(`${process.env.OUT}/upload-probe.json`, JSON.stringify(rows, null, 1));
process.exit(0);
