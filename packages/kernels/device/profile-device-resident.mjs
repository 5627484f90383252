// Runs on the H200 device machine (through run-h200.sh profile): where the host time of a verified
// device-resident decode goes. The default webgpu kernels decode a 2^26-value payload to the device
// in rounds alternating with the raw BF16 pieced upload (the target's baseline), then the same
// decodes run again under the V8 CPU profiler; the profile lands in $OUT for
// summarizing on the host. Usage: node profile-device-resident.mjs [log2 size, default 26]
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { calibrateCodebook, encode } from '@splitzip/codec';
import { createKernels, installNodeWebGpu } from '@splitzip/kernels';
import gpujs from 'gpu.js';
import { createRawBf16Uploader } from './raw-bf16-upload.mjs';

const n = 2 ** Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 26);
const ROUNDS = 15;
const RAW_METHOD = 'mapped staging (kept), 16 MiB pieces + copies';

/** Gaussian BF16 (std 0.02) tiled from a 2^20 block, with rare exponents: h200-bench.mjs's data. */
function modelLike(count) {
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  const blockLength = Math.min(count, 1 << 20);
  const block = new Uint16Array(blockLength);
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  for (let i = 0; i < blockLength; i++) {
    f32[0] = Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd()) * 0.02;
    block[i] = u32[0] >>> 16;
  }
  const values = new Uint16Array(count);
  for (let at = 0, k = 0; at < count; at += blockLength, k++) {
    values.set(block.subarray(0, Math.min(blockLength, count - at)), at);
    for (let i = at + (k % 89); i < Math.min(count, at + blockLength); i += 5003) values[i] = (values[i] & 0x807f) | ((248 - (k % 5)) << 7);
  }
  return values;
}

const status = await installNodeWebGpu();
if (!status.available) throw new Error(`webgpu unavailable: ${status.reason}`);
const device = (await gpujs.WebGPUContext.acquire()).device;
const kernels = await createKernels({ backend: 'webgpu' });
if (kernels.backend !== 'webgpu') throw new Error(`kernels fell back: ${kernels.fallbackReason}`);
const uploader = createRawBf16Uploader(device);
const values = modelLike(n);
const payload = encode(values, calibrateCodebook(values).codebook);

const keys = ['totalMs', 'validateMs', 'prepareMs', 'uploadMs', 'kernelMs'];
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
async function measure(label) {
  const decodes = [];
  const raws = [];
  for (let r = 0; r < ROUNDS; r++) {
    raws.push(await uploader.upload(values, RAW_METHOD));
    const result = await kernels.decodeToDevice(payload);
    decodes.push(result.timings);
    result.delete();
  }
  console.log(`${label}: raw upload ${median(raws).toFixed(2)} ms; device-resident ${keys.map((k) => `${k.replace('Ms', '')} ${median(decodes.map((t) => t[k] ?? 0)).toFixed(2)}`).join(', ')}`);
}

for (let w = 0; w < 3; w++) (await kernels.decodeToDevice(payload)).delete();
await measure(`2^${Math.log2(n)}, unprofiled`);
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 50 });
await session.post('Profiler.start');
await measure(`2^${Math.log2(n)}, profiled`);
const { profile } = await session.post('Profiler.stop');
writeFileSync(`${process.env.OUT ?? '/tmp'}/device-resident.cpuprofile`, JSON.stringify(profile));
await kernels.dispose();
// Dawn's device keeps the event loop alive after dispose (seen on the H200: the call ran into its
// time limit after printing everything).
process.exit(0);
