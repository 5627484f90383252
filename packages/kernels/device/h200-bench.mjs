// Runs on the H200 device machine (through run-h200.sh): checks the webgpu backend (native WGSL
// decode, gpu.js encode) bit-exact under Dawn in Node and times it, split into stages, next to the
// raw BF16 upload (same upload methods), the codec's CPU path and gpu.js's webasm/cpu backends.
// Usage: node h200-bench.mjs smoke|full|checksum|readback   (checksum: the device checksum against the
// other verified paths and the raw upload, alternating rounds, at 2^20, 2^24, 2^26; readback:
// end-to-end decode with several readback piece sizes against the codec, alternating rounds)
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import {
  calibrateCodebook,
  createCodecArena,
  decode as codecDecode,
  encode as codecEncode,
  getCodecBackend,
  readPayloadMeta,
  verifyPayloadChecksum,
  convertPayloadVersion,
} from '@splitzip/codec';
import { createKernels, createWorkerDecoder, defaultChecksumThreads, installNodeWebGpu } from '@splitzip/kernels';
import gpujs from 'gpu.js';
import { modelLike } from './model-like-values.mjs';
import { createRawBf16Uploader, RAW_UPLOAD_METHODS } from './raw-bf16-upload.mjs';

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

/** Runs one bench section; a failure is a FAIL line, and the remaining sections still run. */
async function section(name, fn) {
  try {
    await fn();
  } catch (error) {
    check(`${name} ran`, false, error?.stack ?? String(error));
  }
}

log(`node ${process.version}, ${availableParallelism()} cores (${cpus()[0]?.model ?? '?'}), codec backend ${getCodecBackend()}`);
const status = await installNodeWebGpu();
log(`webgpu (Dawn) available: ${status.available}${status.reason ? `: ${status.reason}` : ''}; software (fallback) adapter: ${status.fallbackAdapter}`);
if (!status.available) process.exitCode = 1;
// auto leaves a software adapter out (install-node-webgpu.ts): on the GPU host it must be the hardware one.
if (status.available) check('the adapter is a hardware one, which auto offers', status.fallbackAdapter === false, 'isFallbackAdapter');
let device = null;
if (status.available) {
  const adapter = await navigator.gpu.requestAdapter();
  const info = adapter.info ?? {};
  log(`adapter: vendor=${info.vendor} device=${info.device} description=${info.description}`);
  device = (await gpujs.WebGPUContext.acquire()).device;
  const { maxStorageBufferBindingSize, maxBufferSize, maxComputeWorkgroupsPerDimension } = device.limits;
  log(`device limits: maxStorageBufferBindingSize=${maxStorageBufferBindingSize} maxBufferSize=${maxBufferSize} maxComputeWorkgroupsPerDimension=${maxComputeWorkgroupsPerDimension}`);
}

// The webgpu variants: the default (what createKernels gives), then each upload mode with the
// stages drained one by one (so upload and kernel are each their own time). A first run
// (RESULTS.md) also had write-buffer and mapped-at-creation pipelined and 2^26-value slices.
const VARIANTS = [
  ['default', {}],
  ['write-buffer, drained stages', { upload: 'write-buffer', drainStages: true }],
  ['mapped-staging, drained stages', { upload: 'mapped-staging', drainStages: true }],
  ['mapped-at-creation, drained stages', { upload: 'mapped-at-creation', drainStages: true }],
];
const instances = new Map();
for (const [label, webgpu] of VARIANTS) {
  const kernels = await createKernels({ backend: 'webgpu', webgpu });
  instances.set(label, kernels);
  check(`webgpu (${label}) started and passed its self-check`, kernels.backend === 'webgpu', kernels.fallbackReason ?? '');
}
const kernels = instances.get('default');
// Payloads in a shared codec arena (where the runtime's staging slots are): the default decoder
// checks their checksum on its worker threads, in place, while the main thread uploads (format v3:
// the segments split across defaultChecksumThreads() workers; v2: one worker hashes it all); the
// same with checksumThreads: 1 on one worker; with checksumWorker: false on the main thread (in
// place) after submitting the work. The arena has a share for each checksum worker.
const sharedArena = createCodecArena(2 * (128 << 20), { threads: defaultChecksumThreads() });
const arenaKernels = await createKernels({ backend: 'webgpu', webgpu: { arena: sharedArena, checksumOnDevice: false } });
check(`webgpu (shared arena, ${defaultChecksumThreads()} checksum workers) started and passed its self-check`, arenaKernels.backend === 'webgpu', arenaKernels.fallbackReason ?? '');
const oneWorkerArena = createCodecArena(128 << 20, { threads: 1 });
const oneWorkerKernels = await createKernels({ backend: 'webgpu', webgpu: { arena: oneWorkerArena, checksumThreads: 1, checksumOnDevice: false } });
check('webgpu (shared arena, 1 checksum worker) started and passed its self-check', oneWorkerKernels.backend === 'webgpu', oneWorkerKernels.fallbackReason ?? '');
const eagerArena = createCodecArena(128 << 20, { threads: defaultChecksumThreads() });
const eagerKernels = await createKernels({ backend: 'webgpu', webgpu: { arena: eagerArena, checksumFollowsUpload: false, checksumOnDevice: false } });
check('webgpu (shared arena, checksumFollowsUpload: false) started and passed its self-check', eagerKernels.backend === 'webgpu', eagerKernels.fallbackReason ?? '');
const hereKernels = await createKernels({ backend: 'webgpu', webgpu: { checksumWorker: false, checksumOnDevice: false } });
check('webgpu (checksumWorker: false) started and passed its self-check', hereKernels.backend === 'webgpu', hereKernels.fallbackReason ?? '');
const uploader = device ? createRawBf16Uploader(device) : null;
// checksumOnDevice: the format-v3 segment digests computed on the device, ordinary payloads.
const DEVICE_UNROLLS = [32, 48, 64];
const deviceSumKernels = new Map();
const hostKernels = await createKernels({ backend: 'webgpu', webgpu: { checksumOnDevice: false } });
if (mode === 'checksum') {
  for (const unroll of DEVICE_UNROLLS) {
    const k = await createKernels({ backend: 'webgpu', webgpu: { checksumOnDevice: true, checksumOnDeviceUnroll: unroll } });
    deviceSumKernels.set(unroll, k);
    check(`webgpu (checksumOnDevice, unroll ${unroll}) started and passed its self-check`, k.backend === 'webgpu', k.fallbackReason ?? '');
  }
}

/**
 * Times decodeToDevice of each case ([label, kernels, payload, options?]) in alternating rounds (one
 * call of each case per round, the raw pieced upload first), so a slower moment of the host costs
 * every row alike; adds the median rows.
 */
async function timeAlternating(n, values, cases) {
  const rounds = n >= 2 ** 26 ? 9 : 7;
  const rawMethod = 'mapped staging (kept), 16 MiB pieces + copies';
  const samples = cases.map(() => []);
  const rawSamples = [];
  for (const [, k, p, o] of cases) (await k.decodeToDevice(p, o)).delete();
  for (let round = 0; round < rounds; round++) {
    if (uploader) rawSamples.push(await uploader.upload(values, rawMethod));
    for (const [i, [, k, p, o]] of cases.entries()) {
      const r = await k.decodeToDevice(p, o);
      r.delete();
      if (r.backend !== 'webgpu') throw new Error(`ran on ${r.backend}: ${r.fallbackReason}`);
      samples[i].push(r.timings);
    }
  }
  const middle = (list) => list.sort((a, b) => (a.totalMs ?? a) - (b.totalMs ?? b))[Math.floor(list.length / 2)];
  if (uploader) addRow(n, `raw BF16 upload: ${rawMethod}, alternating with the rows below`, middle(rawSamples));
  for (const [i, [label]] of cases.entries()) addRow(n, `webgpu device-resident (${label})`, middle(samples[i]));
}

// readback: end-to-end decodes (host payload in, host BF16 out) with readback piece sizes and ring
// sizes, the whole tensor in one piece being the previous behaviour.
const READBACK_VARIANTS = [
  ['one piece, 1 staging (the previous readback)', { readbackPieceBytes: 2 ** 31, readbackStagings: 1 }],
  ['3 MiB pieces, 3 stagings', { readbackPieceBytes: 3 << 20, readbackStagings: 3 }],
  ['4 MiB pieces, 2 stagings', { readbackPieceBytes: 4 << 20, readbackStagings: 2 }],
  ['default (4 MiB pieces, 3 stagings)', {}],
  ['4 MiB pieces, 4 stagings', { readbackPieceBytes: 4 << 20, readbackStagings: 4 }],
  ['6 MiB pieces, 3 stagings', { readbackPieceBytes: 6 << 20, readbackStagings: 3 }],
  ['8 MiB pieces, 2 stagings', { readbackPieceBytes: 8 << 20, readbackStagings: 2 }],
  ['8 MiB pieces, 3 stagings', { readbackPieceBytes: 8 << 20, readbackStagings: 3 }],
];
const readbackKernels = new Map();
if (mode === 'readback') {
  for (const [label, webgpu] of READBACK_VARIANTS) {
    const k = await createKernels({ backend: 'webgpu', webgpu });
    readbackKernels.set(label, k);
    check(`webgpu (${label}) started and passed its self-check`, k.backend === 'webgpu', k.fallbackReason ?? '');
  }
}

/**
 * End-to-end decode with each readback variant and the codec on one thread (and a host copy of the
 * output's size), in alternating rounds (one call of each per round), medians; then bit-exact
 * checks of every variant, toArray, and a corrupted payload that must not reach the target.
 */
async function compareReadback(n, tag, values, payload) {
  const rounds = n >= 2 ** 26 ? 11 : 9;
  const out = new Uint16Array(n);
  const copy = new Uint16Array(n);
  const timers = [
    ['typed-array copy of the output (host), alternating with the rows below', () => {
      const t = now();
      copy.set(values);
      return now() - t;
    }],
    ['codec, 1 thread', () => {
      const t = now();
      codecDecode(payload, out);
      return now() - t;
    }],
    ...[...readbackKernels].map(([label, k]) => [`webgpu end-to-end, readback ${label}`, async () => {
      const r = await k.decode(payload, out);
      if (r.backend !== 'webgpu') throw new Error(`ran on ${r.backend}: ${r.fallbackReason}`);
      return r.timings;
    }]),
  ];
  for (const [, fn] of timers) await fn();
  const samples = timers.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (const [i, [, fn]] of timers.entries()) samples[i].push(await fn());
  }
  const middle = (list) => list.sort((a, b) => (a.totalMs ?? a) - (b.totalMs ?? b))[Math.floor(list.length / 2)];
  for (const [i, [label]] of timers.entries()) addRow(n, label, middle(samples[i]));
  for (const [label, k] of readbackKernels) {
    out.fill(0);
    const r = await k.decode(payload, out);
    check(`webgpu decode ${tag} (readback ${label}) bit-exact`, r.backend === 'webgpu' && firstMismatch(out, values) === -1);
    const dev = await k.decodeToDevice(payload);
    check(`webgpu toArray ${tag} (readback ${label}) bit-exact`, firstMismatch(await dev.toArray(), values) === -1);
    dev.delete();
  }
  const bad = payload.slice();
  bad[readPayloadMeta(payload).layout.escapeIndex.offsetBytes - 256 - 99] ^= 1;
  out.fill(0x5a5a);
  let code = 'resolved';
  try {
    await kernels.decode(bad, out);
  } catch (error) {
    code = error?.code ?? String(error);
  }
  check(`webgpu decode ${tag} of a corrupted payload rejects with CHECKSUM_MISMATCH, target untouched`, code === 'CHECKSUM_MISMATCH' && out.every((v) => v === 0x5a5a), code);
}

/** The device checksum next to the raw pieced upload and the other verified paths, alternating rounds. */
async function compareDeviceChecksum(n, tag, values, payload, runs) {
  const slot = (sharedArena.reset(), sharedArena.allocate(payload.length));
  slot.set(payload);
  const cases = [
    ...DEVICE_UNROLLS.map((u) => [`checksumOnDevice (unroll ${u}), ordinary payload (v3)`, deviceSumKernels.get(u), payload]),
    [`checksumOnDevice: false, payload (v3) in a shared codec arena: ${defaultChecksumThreads()} workers behind the upload`, arenaKernels, slot],
    ['default (checksumOnDevice), ordinary payload (v3)', kernels, payload],
    ['checksumOnDevice: false, ordinary payload (v3): hashed on this thread', hostKernels, payload],
    ['verify: false, ordinary payload', kernels, payload, { verify: false }],
  ];
  await timeAlternating(n, values, cases);
  const out = new Uint16Array(n);
  for (const [unroll, k] of deviceSumKernels) {
    const r = await k.decodeToDevice(payload);
    check(`webgpu decodeToDevice ${tag} (checksumOnDevice, unroll ${unroll}) bit-exact`, r.backend === 'webgpu' && firstMismatch(await r.toArray(), values) === -1);
    r.delete();
    // One byte of the last segment's sm span, one of the first segment's codes: the device's digests reject both.
    const { layout } = readPayloadMeta(payload);
    for (const at of [layout.escapeIndex.offsetBytes - 256 - 99, layout.codes.offsetBytes + 12345]) {
      const bad = payload.slice();
      bad[at] ^= 1;
      let code = 'resolved';
      try {
        (await k.decodeToDevice(bad)).delete();
      } catch (error) {
        code = error?.code ?? String(error);
      }
      check(`webgpu decodeToDevice ${tag} (checksumOnDevice, unroll ${unroll}) of a payload with byte ${at} flipped rejects with CHECKSUM_MISMATCH`, code === 'CHECKSUM_MISMATCH', code);
    }
  }
  addRow(n, 'webgpu end-to-end (default: checksumOnDevice, ordinary payload)', await median(runs, async () => (await kernels.decode(payload, out)).timings));
  check(`webgpu decode ${tag} (checksumOnDevice) bit-exact`, firstMismatch(out, values) === -1);
  addRow(n, 'webgpu end-to-end (checksumOnDevice: false, ordinary payload: hashed on this thread)', await median(runs, async () => (await hostKernels.decode(payload, out)).timings));
  addRow(n, 'codec, 1 thread', await median(runs, async () => {
    const t = now();
    codecDecode(payload, out);
    return now() - t;
  }));
}

const sizes = mode === 'smoke' ? [2 ** 20] : [2 ** 20, 2 ** 24, 2 ** 26];
log('\n| size | path | total ms | GB/s (BF16) | validate | pack | upload | kernel | readback |');
log('|---|---|---|---|---|---|---|---|---|');
for (const n of sizes) {
  const runs = n >= 2 ** 26 ? 3 : 5;
  const tag = `2^${Math.log2(n)}`;
  const values = modelLike(n);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);
  if (mode === 'checksum') {
    if (kernels.backend === 'webgpu') await section(`device checksum ${tag}`, () => compareDeviceChecksum(n, tag, values, payload, runs));
    continue;
  }
  if (mode === 'readback') {
    if (kernels.backend === 'webgpu') await section(`readback ${tag}`, () => compareReadback(n, tag, values, payload));
    continue;
  }
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
  check(`codec decode ${tag}`, firstMismatch(out, values) === -1);
  addRow(n, 'codec, 1 thread, no checksum', await median(runs, async () => {
    const t = now();
    codecDecode(payload, out, { verify: false });
    return now() - t;
  }));

  if (uploader) {
    for (const method of RAW_UPLOAD_METHODS) {
      await section(`raw upload ${method} ${tag}`, async () => {
        addRow(n, `raw BF16 upload: ${method}`, await median(runs, () => uploader.upload(values, method)));
      });
    }
  }

  for (const [label, k] of instances) {
    if (k.backend !== 'webgpu') continue;
    await section(`webgpu ${label} ${tag}`, async () => {
      const dev = await median(runs, async () => {
        const r = await k.decodeToDevice(payload);
        r.delete();
        if (r.backend !== 'webgpu') throw new Error(`ran on ${r.backend}: ${r.fallbackReason}`);
        return r.timings;
      });
      addRow(n, `webgpu device-resident (${label})`, dev);
      const kept = await k.decodeToDevice(payload);
      check(
        `webgpu (${label}) decodeToDevice ${tag} bit-exact (${kept.segments.length} buffer(s), ${kept.layout})`,
        kept.backend === 'webgpu' && kept.layout === 'bf16' && firstMismatch(await kept.toArray(), values) === -1,
      );
      kept.delete();
    });
    if (label !== 'default' && label !== 'mapped-staging, drained stages') continue;
    await section(`webgpu ${label} end-to-end ${tag}`, async () => {
      out.fill(0);
      const e2e = await median(runs, async () => (await k.decode(payload, out)).timings);
      addRow(n, `webgpu end-to-end (${label})`, e2e);
      check(`webgpu (${label}) decode ${tag} bit-exact`, firstMismatch(out, values) === -1);
    });
  }
  if (kernels.backend === 'webgpu') {
    await section(`webgpu kept results ${tag}`, async () => {
      // Results kept alive until after the timing: every call needs a new output buffer.
      const kept = [];
      const dev = await median(runs, async () => {
        const r = await kernels.decodeToDevice(payload);
        kept.push(r);
        return r.timings;
      });
      for (const r of kept) r.delete();
      addRow(n, 'webgpu device-resident (default, results kept: a new buffer per call)', dev);
    });
    await section(`webgpu arena payload ${tag}`, async () => {
      sharedArena.reset();
      const slot = sharedArena.allocate(payload.length);
      slot.set(payload);
      const slotV2 = sharedArena.allocate(payload.length);
      slotV2.set(convertPayloadVersion(payload, 2));
      oneWorkerArena.reset();
      const oneSlot = oneWorkerArena.allocate(payload.length);
      oneSlot.set(payload);
      eagerArena.reset();
      const eagerSlot = eagerArena.allocate(payload.length);
      eagerSlot.set(payload);
      const sab = new Uint8Array(new SharedArrayBuffer(payload.length));
      sab.set(payload);
      const k = defaultChecksumThreads();
      const cases = [
        [`checksumOnDevice: false, payload (v3) in a shared codec arena: segments hashed on ${k} workers behind the upload`, arenaKernels, slot],
        [`checksumFollowsUpload: false, payload (v3) in a shared codec arena: ${k} workers from the start`, eagerKernels, eagerSlot],
        ['checksumThreads: 1, payload (v3) in a shared codec arena: one worker hashes every segment', oneWorkerKernels, oneSlot],
        ['checksumOnDevice: false, the same payload resealed as format v2 in the arena: one worker hashes it all', arenaKernels, slotV2],
        ['checksumWorker: false, payload (v3) in a shared codec arena', hereKernels, slot],
        [`checksumOnDevice: false, payload (v3) in a SharedArrayBuffer (not an arena): ${k} workers`, arenaKernels, sab],
        // The same arena payload to a decoder given no arena: its workers hash it through their
        // kernel scratch, as the plain SharedArrayBuffer above (is it the memory or the method?).
        [`default (checksumOnDevice) without webgpu.arena, payload (v3) in a shared codec arena`, kernels, slot],
        ['verify: false, payload (v3) in a shared codec arena', arenaKernels, slot, { verify: false }],
      ];
      await timeAlternating(n, values, cases);
      for (const [label, k, p] of cases) {
        const r = await k.decodeToDevice(p);
        check(`webgpu decodeToDevice ${tag} (${label}) bit-exact`, firstMismatch(await r.toArray(), values) === -1);
        r.delete();
      }
      // A corrupted payload in the arena (one sm byte of the LAST segment flipped, the checksum
      // field intact): rejected by the workers' segment digests, and on the v2 path.
      const at = readPayloadMeta(payload).layout.escapeIndex.offsetBytes - 256 - 99;
      for (const [label, p] of [['v3', slot], ['v2', slotV2]]) {
        p[at] ^= 1;
        let code = 'resolved';
        try {
          (await arenaKernels.decodeToDevice(p)).delete();
        } catch (error) {
          code = error?.code ?? String(error);
        }
        p[at] ^= 1;
        check(`webgpu decodeToDevice ${tag} of a corrupted arena payload (${label}, last segment) rejects with CHECKSUM_MISMATCH`, code === 'CHECKSUM_MISMATCH', code);
      }
    });
    await section(`checksum alone ${tag}`, async () => {
      // The checksum alone (no upload running), in place in a shared arena: on K workers (v3
      // segments), on this thread, and the v2 twin on this thread.
      const k = defaultChecksumThreads();
      const arena = createCodecArena(2 * (128 << 20), { threads: k });
      const slot = arena.allocate(payload.length);
      slot.set(payload);
      const slotV2 = arena.allocate(payload.length);
      slotV2.set(convertPayloadVersion(payload, 2));
      const many = createWorkerDecoder({ threads: k, arena });
      try {
        const time = async (fn) => median(runs, async () => {
          const t = now();
          await fn();
          return now() - t;
        });
        addRow(n, `checksum alone: v3 segments on ${k} workers, in place (no upload)`, await time(() => many.verifyChecksum(slot)));
        addRow(n, 'checksum alone: v3 on this thread, in place (no upload)', await time(() => verifyPayloadChecksum(slot)));
        addRow(n, 'checksum alone: v2 twin on this thread, in place (no upload)', await time(() => verifyPayloadChecksum(slotV2)));
      } finally {
        await many.dispose();
      }
    });
    await section(`webgpu no checksum ${tag}`, async () => {
      const dev = await median(runs, async () => {
        const r = await kernels.decodeToDevice(payload, { verify: false });
        r.delete();
        return r.timings;
      });
      addRow(n, 'webgpu device-resident (default, verify: false)', dev);
    });
    if (n <= 2 ** 24) {
      await section(`webgpu v1 payload ${tag}`, async () => {
        const v1 = convertPayloadVersion(payload, 1);
        const r = await kernels.decode(v1);
        check(`webgpu decode of a format-version-1 payload ${tag} bit-exact`, readPayloadMeta(v1).version === 1 && r.backend === 'webgpu' && firstMismatch(r.values, values) === -1);
      });
    }
    await section(`webgpu encode ${tag}`, async () => {
      const encoded = await kernels.encode(values, codebook);
      check(`webgpu (gpu.js) encode ${tag} = codec bytes`, encoded.backend === 'webgpu' && firstMismatch(encoded.payload, payload) === -1);
      addRow(n, 'webgpu encode (gpu.js kernels)', await median(runs, async () => (await kernels.encode(values, codebook)).timings));
      addRow(n, 'codec encode, 1 thread', await median(runs, async () => {
        const t = now();
        codecEncode(values, codebook);
        return now() - t;
      }));
    });
  }
  if (mode === 'full' && n <= 2 ** 24) {
    for (const backend of ['webasm', 'cpu']) {
      await section(`${backend} ${tag}`, async () => {
        const k = await createKernels({ backend });
        const r = await median(3, async () => (await k.decode(payload, out)).timings);
        addRow(n, `${backend} (gpu.js) end-to-end`, r);
        check(`${backend} decode ${tag}`, firstMismatch(out, values) === -1);
        await k.dispose();
      });
    }
  }
}

for (const k of [...instances.values(), ...deviceSumKernels.values(), ...readbackKernels.values(), hostKernels, arenaKernels, eagerKernels, oneWorkerKernels, hereKernels]) await k.dispose();
uploader?.destroy();
const failed = checks.filter((c) => !c.ok).length;
log(`\n${checks.length - failed} checks passed, ${failed} failed`);
if (failed > 0) process.exitCode = 1;
if (process.env.OUT) writeFileSync(`${process.env.OUT}/h200-${mode}.json`, JSON.stringify({ mode, rows, checks }, null, 1));
// Dawn's instance keeps Node's event loop alive after its last use (seen on the H200): exit.
process.exit(process.exitCode ?? 0);
