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
import { modelLike } from './model-like-values.mjs';
import { alternateRawAndDeviceResident, createRawBf16Uploader, DEVICE_RESIDENT_KEYS } from './raw-bf16-upload.mjs';

const n = 2 ** Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 26);
const ROUNDS = 15;
const RAW_METHOD = 'mapped staging (kept), 16 MiB pieces + copies';

const status = await installNodeWebGpu();
if (!status.available) throw new Error(`webgpu unavailable: ${status.reason}`);
const device = (await gpujs.WebGPUContext.acquire()).device;
const kernels = await createKernels({ backend: 'webgpu' });
if (kernels.backend !== 'webgpu') throw new Error(`kernels fell back: ${kernels.fallbackReason}`);
const uploader = createRawBf16Uploader(device);
const values = modelLike(n);
const payload = encode(values, calibrateCodebook(values).codebook);

async function measure(label) {
  const { rawMs, timings } = await alternateRawAndDeviceResident(uploader, kernels, values, payload, RAW_METHOD, ROUNDS);
  console.log(`${label}: raw upload ${rawMs.toFixed(2)} ms; device-resident ${DEVICE_RESIDENT_KEYS.map((k) => `${k.replace('Ms', '')} ${timings[k].toFixed(2)}`).join(', ')}`);
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
