// Runs on the H200 device machine (through run-h200.sh pieces): the verified device-resident decode
// of a 2^26-value payload with several upload piece sizes (webgpu.uploadPieceBytes), each in rounds
// alternating with the raw BF16 pieced upload (the target's baseline), to see whether the default
// (16 MiB) is the best trade between per-piece host work and the tail after the last piece.
// Usage: node tune-upload-pieces.mjs [log2 size, default 26]
import { calibrateCodebook, encode } from '@splitzip/codec';
import { createKernels, installNodeWebGpu } from '@splitzip/kernels';
import gpujs from 'gpu.js';
import { modelLike } from './model-like-values.mjs';
import { alternateRawAndDeviceResident, createRawBf16Uploader, DEVICE_RESIDENT_KEYS } from './raw-bf16-upload.mjs';

const n = 2 ** Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 26);
const ROUNDS = 15;
const RAW_METHOD = 'mapped staging (kept), 16 MiB pieces + copies';
const PIECE_MIB = [4, 8, 16, 24, 32, 64];

const status = await installNodeWebGpu();
if (!status.available) throw new Error(`webgpu unavailable: ${status.reason}`);
const device = (await gpujs.WebGPUContext.acquire()).device;
const uploader = createRawBf16Uploader(device);
const values = modelLike(n);
const payload = encode(values, calibrateCodebook(values).codebook);

console.log(`2^${Math.log2(n)} values, payload ${payload.length} bytes, ${ROUNDS} alternating rounds per row (medians, ms)`);
console.log('| upload piece | raw upload | device-resident (verified) | raw / device | validate | prepare | upload | kernel |');
console.log('|---|---|---|---|---|---|---|---|');
for (const pass of [0, 1]) {
  for (const mib of pass === 0 ? PIECE_MIB : [...PIECE_MIB].reverse()) {
    const kernels = await createKernels({ backend: 'webgpu', webgpu: { uploadPieceBytes: mib << 20 } });
    if (kernels.backend !== 'webgpu') throw new Error(`kernels fell back: ${kernels.fallbackReason}`);
    for (let w = 0; w < 3; w++) (await kernels.decodeToDevice(payload)).delete();
    const { rawMs: raw, timings } = await alternateRawAndDeviceResident(uploader, kernels, values, payload, RAW_METHOD, ROUNDS);
    const [total, ...parts] = DEVICE_RESIDENT_KEYS.map((k) => timings[k]);
    console.log(`| ${mib} MiB${pass ? ' (again)' : ''} | ${raw.toFixed(2)} | ${total.toFixed(2)} | ${(raw / total).toFixed(2)}x | ${parts.map((x) => x.toFixed(2)).join(' | ')} |`);
    await kernels.dispose();
  }
}
// Dawn keeps the event loop alive after dispose.
process.exit(0);
