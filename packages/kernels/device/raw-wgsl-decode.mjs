// A REFERENCE decoder in hand-written WGSL, NOT gpu.js: it reads the payload bytes as they are
// (u32 words, bit operations) and writes two BF16 values per u32, so the upload is the payload
// itself (~1.5 bytes/value) and the device result is the raw BF16 tensor (2 bytes/value). It
// exists to show, next to the gpu.js backend, where the time goes when kernels are not limited to
// float inputs and outputs (gpu.js's interface). Used by h200-bench.mjs only; not part of the API.

const USAGE = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };
const THREADS_PER_GROUP = 256;
const MAX_GROUPS_X = 32768;

const SHADER = /* wgsl */ `
struct Params {
  n : u32, chunkShift : u32, codesAt : u32, smAt : u32,
  indexAt : u32, posAt : u32, expAt : u32, rowThreads : u32,
  codebook : array<vec4<u32>, 4>,
}
@group(0) @binding(0) var<uniform> params : Params;
@group(0) @binding(1) var<storage, read> payload : array<u32>;
@group(0) @binding(2) var<storage, read_write> result : array<u32>;

fn byteAt(o : u32) -> u32 { return (payload[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu; }
fn u16At(o : u32) -> u32 { return (payload[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu; }
fn codeExponent(code : u32) -> u32 { return params.codebook[code >> 2u][code & 3u]; }

// The exponent of value i: its code's, unless the chunk's escape list holds i.
fn exponentOf(i : u32, fromCode : u32) -> u32 {
  let c = i >> params.chunkShift;
  let first = payload[(params.indexAt >> 2u) + c];
  let end = payload[(params.indexAt >> 2u) + c + 1u];
  if (end == first) { return fromCode; }
  let p = i - (c << params.chunkShift);
  var lo = first;
  var hi = end;
  loop {
    if (lo >= hi) { break; }
    let mid = (lo + hi) >> 1u;
    if (u16At(params.posAt + 2u * mid) < p) { lo = mid + 1u; } else { hi = mid; }
  }
  if (lo < end && u16At(params.posAt + 2u * lo) == p) { return byteAt(params.expAt + lo); }
  return fromCode;
}

fn value(i : u32, codes : u32, sms : u32, k : u32) -> u32 {
  let code = (codes >> (4u * k)) & 15u;
  let sm = (sms >> (8u * k)) & 255u;
  let e = exponentOf(i, codeExponent(code));
  return ((sm & 0x80u) << 8u) | (e << 7u) | (sm & 0x7fu);
}

// One thread per 4 values: one u16 of codes, one u32 of sign/mantissa bytes, two u32 out.
@compute @workgroup_size(${THREADS_PER_GROUP})
fn main(@builtin(global_invocation_id) gid : vec3<u32>) {
  let q = gid.x + gid.y * params.rowThreads;
  let i0 = 4u * q;
  if (i0 >= params.n) { return; }
  let codes = u16At(params.codesAt + 2u * q);
  let sms = payload[(params.smAt >> 2u) + q];
  var v0 = value(i0, codes, sms, 0u);
  var v1 = 0u; var v2 = 0u; var v3 = 0u;
  if (i0 + 1u < params.n) { v1 = value(i0 + 1u, codes, sms, 1u); }
  result[2u * q] = v0 | (v1 << 16u);
  if (i0 + 2u < params.n) {
    v2 = value(i0 + 2u, codes, sms, 2u);
    if (i0 + 3u < params.n) { v3 = value(i0 + 3u, codes, sms, 3u); }
    result[2u * q + 1u] = v2 | (v3 << 16u);
  }
}
`;

const now = () => performance.now();

/** `meta` is the codec's readPayloadMeta(payload); the payload must have passed the codec's checks. */
export async function createRawWgslDecoder(device) {
  const module = device.createShaderModule({ code: SHADER });
  const info = await module.getCompilationInfo();
  const errors = info.messages.filter((m) => m.type === 'error');
  if (errors.length > 0) throw new Error(`raw WGSL: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ')}`);
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const params = device.createBuffer({ size: 96, usage: USAGE.UNIFORM | USAGE.COPY_DST });
  let payloadBuffer = null;

  return {
    /** Uploads the payload and decodes it on the device; returns the output buffer and stage times. */
    async decodeToDevice(payload, meta) {
      let t = now();
      const bytes = Math.ceil(meta.compBytes / 4) * 4;
      if (!payloadBuffer || payloadBuffer.size < bytes) {
        payloadBuffer?.destroy();
        payloadBuffer = device.createBuffer({ size: bytes, usage: USAGE.STORAGE | USAGE.COPY_DST });
      }
      device.queue.writeBuffer(payloadBuffer, 0, payload.buffer, payload.byteOffset, bytes);
      await device.queue.onSubmittedWorkDone();
      const uploadMs = now() - t;

      t = now();
      const threads = Math.ceil(meta.elementCount / 4);
      const groups = Math.max(1, Math.ceil(threads / THREADS_PER_GROUP));
      const gx = Math.min(groups, MAX_GROUPS_X);
      const gy = Math.ceil(groups / gx);
      const u = new Uint32Array(24);
      u.set([meta.elementCount, Math.log2(meta.chunkSize), meta.layout.codes.offsetBytes, meta.layout.sm.offsetBytes,
        meta.layout.escapeIndex.offsetBytes, meta.layout.escapePositions.offsetBytes, meta.layout.escapeExponents.offsetBytes,
        gx * THREADS_PER_GROUP]);
      meta.codebook.exponents.forEach((e, k) => (u[8 + k] = e));
      device.queue.writeBuffer(params, 0, u);
      const output = device.createBuffer({ size: Math.max(16, Math.ceil(meta.elementCount / 2) * 4), usage: USAGE.STORAGE | USAGE.COPY_SRC });
      const bindGroup = device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: params } },
          { binding: 1, resource: { buffer: payloadBuffer } },
          { binding: 2, resource: { buffer: output } },
        ],
      });
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(gx, gy);
      pass.end();
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
      const kernelMs = now() - t;
      return { output, uploadMs, kernelMs };
    },

    /** Copies a result back to the host as BF16 bit patterns. */
    async readBack(output, elementCount) {
      const staging = device.createBuffer({ size: output.size, usage: USAGE.MAP_READ | USAGE.COPY_DST });
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(output, 0, staging, 0, output.size);
      device.queue.submit([encoder.finish()]);
      await staging.mapAsync(0x1);
      const values = new Uint16Array(staging.getMappedRange().slice(0), 0, elementCount);
      staging.unmap();
      staging.destroy();
      return values;
    },

    destroy() {
      payloadBuffer?.destroy();
      params.destroy();
    },
  };
}

/**
 * The baseline: the raw BF16 tensor uploaded as-is into a storage buffer (kept across calls, as
 * the decoders keep theirs). Returns ms until the queue drained.
 */
let rawBuffer = null;
export async function uploadRawBf16(device, values) {
  const bytes = Math.floor(values.byteLength / 4) * 4;
  if (!rawBuffer || rawBuffer.size < bytes) {
    rawBuffer?.destroy();
    rawBuffer = device.createBuffer({ size: Math.max(16, bytes), usage: USAGE.STORAGE | USAGE.COPY_DST });
  }
  const t = now();
  device.queue.writeBuffer(rawBuffer, 0, values.buffer, values.byteOffset, bytes);
  await device.queue.onSubmittedWorkDone();
  return now() - t;
}
