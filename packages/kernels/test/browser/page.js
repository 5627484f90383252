// Runs in headless Chromium: checks every backend bit-exact on the same inputs as the Node tests
// (generated here the same way), through the built browser bundles. window.runChecks(backend)
// returns a plain report the vitest side asserts on.
/* global GPU, GPUBuffer, GPUBufferUsage, GPUMapMode, HTMLCanvasElement */
import { calibrateCodebook, convertPayloadVersion, createCodebook, encode, readPayloadMeta } from '@splitzip/codec';
import { createKernels } from '@splitzip/kernels';

function createRandom(seed) {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
}

function allPatterns(seed) {
  const values = new Uint16Array(65536);
  for (let i = 0; i < 65536; i++) values[i] = i;
  const random = createRandom(seed);
  for (let i = values.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = values[i];
    values[i] = values[j];
    values[j] = t;
  }
  return values;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function modelLike(n, seed) {
  const random = createRandom(seed);
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(random(), 1e-12);
    const r = Math.sqrt(-2 * Math.log(u)) * 0.02;
    const a = 2 * Math.PI * random();
    f32[0] = r * Math.cos(a);
    values[i] = u32[0] >>> 16;
    if (i + 1 < n) {
      f32[0] = r * Math.sin(a);
      values[i + 1] = u32[0] >>> 16;
    }
  }
  return values;
}

function escapeHeavy(n, seed) {
  const random = createRandom(seed);
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i++) values[i] = Math.floor(random() * 65536);
  return values;
}

/** Scalar reference decoder from FORMAT.md (no shared code with the packages). */
function referenceDecode(payload) {
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const chunkSize = dv.getUint32(12, true);
  const n = Number(dv.getBigUint64(16, true));
  const chunkCount = dv.getUint32(32, true);
  const codebook = Array.from(payload.subarray(40, 40 + payload[36]));
  const at = (o) => Number(dv.getBigUint64(o, true));
  const [codesAt, smAt, indexAt, posAt, expAt] = [at(56), at(72), at(88), at(104), at(120)];
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const byte = payload[codesAt + Math.floor(i / 2)];
    const code = i % 2 === 0 ? byte & 15 : byte >> 4;
    const sm = payload[smAt + i];
    out[i] = ((sm & 0x80) << 8) | (codebook[code] << 7) | (sm & 0x7f);
  }
  for (let c = 0; c < chunkCount; c++) {
    for (let j = dv.getUint32(indexAt + 4 * c, true); j < dv.getUint32(indexAt + 4 * c + 4, true); j++) {
      const i = c * chunkSize + dv.getUint16(posAt + 2 * j, true);
      out[i] = (out[i] & 0x807f) | (payload[expAt + j] << 7);
    }
  }
  return out;
}

function firstMismatch(a, b) {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

function withEscapesAt(values, at) {
  for (const i of at) values[i] = (values[i] & 0x807f) | (250 << 7);
  return values;
}

function buildCases(largeCount) {
  const modelBook = calibrateCodebook(modelLike(1 << 16, 1)).codebook;
  const cases = [
    { name: 'all 65,536 patterns', values: allPatterns(7) },
    { name: 'all 65,536 patterns, model codebook (most escape)', values: allPatterns(3), codebook: modelBook },
    { name: 'model-like 100,003 values (odd)', values: modelLike(100003, 2) },
    { name: 'model-like 4,097 values, chunk 64', values: modelLike(4097, 5), chunkSize: 64 },
    { name: 'escape-heavy 30,001 values', values: escapeHeavy(30001, 13), codebook: modelBook },
    { name: 'escape-heavy 131,075 values, chunk 65536', values: escapeHeavy(131075, 9), codebook: modelBook, chunkSize: 65536 },
    { name: 'three values', values: new Uint16Array([0x3f80, 0xbf00, 0x0001]), codebook: createCodebook([127, 126, 0]) },
    { name: 'six values, the last two escapes', values: new Uint16Array([0x3f80, 0xbf00, 0x3f00, 0x8001, 0x7f80, 0x4000]), codebook: createCodebook([127, 126, 0]) },
    { name: 'single escape', values: new Uint16Array([0x7f80]), codebook: createCodebook([127]) },
    // The codebook is calibrated before the markers go in: calibrated after, exponent 250 takes a slot and nothing escapes.
    { name: 'model-like 1,029 values, chunk 128, escapes in the last word', values: withEscapesAt(modelLike(1029, 6), [1024, 1027, 1028]), codebook: calibrateCodebook(modelLike(1029, 6)).codebook, chunkSize: 128, minEscapes: 3 },
    { name: 'format version 1 payload, model-like 70,001 values', values: modelLike(70001, 4), version1: true },
    { name: 'empty', values: new Uint16Array(0), codebook: createCodebook([127]) },
  ];
  if (largeCount > 0) {
    const large = modelLike(largeCount, 17);
    const largeBook = calibrateCodebook(large).codebook; // before the markers: 250 stays an escape
    for (let i = 0; i < large.length; i += 4099) large[i] = (large[i] & 0x807f) | (250 << 7);
    cases.push({ name: `model-like ${largeCount} values (several launches)`, values: large, codebook: largeBook, minEscapes: Math.ceil(large.length / 4099) });
  }
  for (const c of cases) {
    c.codebook ??= calibrateCodebook(c.values).codebook;
    c.options = c.chunkSize ? { chunkSize: c.chunkSize } : undefined;
    c.encoded = encode(c.values, c.codebook, c.options);
    c.payload = c.version1 ? convertPayloadVersion(c.encoded, 1) : c.encoded;
    // A case that claims escapes must have them (a fixture that has none checks nothing of the patch path).
    if (c.minEscapes && readPayloadMeta(c.payload).escapeCount < c.minEscapes) throw new Error(`${c.name}: only ${readPayloadMeta(c.payload).escapeCount} escapes`);
  }
  return cases;
}

async function environment() {
  const canvas = document.createElement('canvas');
  const gl2 = canvas.getContext('webgl2');
  const adapter = navigator.gpu ? await navigator.gpu.requestAdapter() : null;
  const info = adapter ? adapter.info || {} : {};
  return {
    webgl2Renderer: gl2 ? gl2.getParameter(gl2.RENDERER) : null,
    webgpu: adapter ? { vendor: info.vendor, architecture: info.architecture, isFallbackAdapter: adapter.isFallbackAdapter } : null,
    crossOriginIsolated: self.crossOriginIsolated,
  };
}

/** Decode, decodeToDevice and encode on one backend; a list of failures (empty = all bit-exact). */
async function runChecks(backend, largeCount) {
  const report = { backend, env: await environment(), started: null, fallbackReason: null, checks: 0, failures: [] };
  const kernels = await createKernels({ backend });
  report.started = kernels.backend;
  report.fallbackReason = kernels.fallbackReason;
  try {
    for (const c of buildCases(largeCount)) {
      const expected = referenceDecode(c.payload);
      if (firstMismatch(expected, c.values) !== -1) report.failures.push(`${c.name}: reference disagrees with the input`);
      if (c.version1 && readPayloadMeta(c.payload).version !== 1) report.failures.push(`${c.name}: not a version-1 payload`);
      const decoded = await kernels.decode(c.payload);
      const wrong = firstMismatch(decoded.values, expected);
      report.checks++;
      if (decoded.backend !== backend) report.failures.push(`${c.name}: decode ran on ${decoded.backend} (${decoded.fallbackReason})`);
      if (wrong !== -1) report.failures.push(`${c.name}: decode differs at ${wrong}: ${decoded.values[wrong]} != ${expected[wrong]}`);

      const device = await kernels.decodeToDevice(c.payload);
      const back = await device.toArray();
      device.delete();
      report.checks++;
      if (device.backend !== backend) report.failures.push(`${c.name}: decodeToDevice ran on ${device.backend}`);
      const wrongDevice = firstMismatch(back, expected);
      if (wrongDevice !== -1) report.failures.push(`${c.name}: decodeToDevice differs at ${wrongDevice}`);
      report.location = device.location;

      const encoded = await kernels.encode(c.values, c.codebook, c.options);
      report.checks++;
      if (encoded.backend !== backend) report.failures.push(`${c.name}: encode ran on ${encoded.backend} (${encoded.fallbackReason})`);
      const wrongByte = firstMismatch(encoded.payload, c.encoded);
      if (wrongByte !== -1) report.failures.push(`${c.name}: encode differs from the codec at byte ${wrongByte}`);
    }
  } finally {
    await kernels.dispose();
  }
  return report;
}

/** A GPUBuffer's bytes, through a mapped copy on gpu.js's shared device (the decoder's device). */
async function readGpuBuffer(buffer) {
  const { device } = await GPU.WebGPUContext.acquire();
  const staging = device.createBuffer({ size: buffer.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, staging, 0, buffer.size);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const bytes = new Uint8Array(staging.getMappedRange().slice(0));
  staging.unmap();
  staging.destroy();
  return bytes;
}

/**
 * The native WebGPU decoder beyond runChecks: every upload mode with small slices and buffers (so
 * tensors span many slices and several output buffers), the output buffers' exact layout, more
 * than 2^24 values with the defaults, and bad payloads rejected with the codec's errors.
 */
async function runWebGpuChecks(largeCount, hugeCount) {
  const report = { checks: 0, failures: [], segments: {} };
  const fail = (message) => report.failures.push(message);
  const cases = buildCases(largeCount);
  // Readback pieces (decode, toArray) of 2,056 and 8,200 values: not multiples of 2^k beyond 8 nor
  // of the chunk sizes; several per output buffer (512 KiB), so pieces cross slices and segments.
  const configs = [
    ['write-buffer', { sliceElements: 4096, maxBufferBytes: 2 ** 19, readbackPieceBytes: 4112, readbackStagings: 4 }],
    // Upload pieces of 32 KiB: a few slices each, many pieces per output buffer.
    ['mapped-staging', { sliceElements: 4096, maxBufferBytes: 2 ** 19, uploadPieceBytes: 2 ** 15, readbackPieceBytes: 16400, readbackStagings: 2 }],
    ['mapped-at-creation', { sliceElements: 4096, maxBufferBytes: 2 ** 19 }],
    // 2-D workgroup grids: 16 groups per dimension; 2^16-value slices need 32 decode groups and
    // up to 256 patch groups (16 x 16 is the most a slice may need, so slices stay 2^16).
    ['2-D grids', { sliceElements: 2 ** 16, maxWorkgroupsPerDimension: 16 }],
  ];
  for (const [upload, tuning] of configs) {
    const options = upload === '2-D grids' ? tuning : { upload, ...tuning };
    const kernels = await createKernels({ backend: 'webgpu', webgpu: options });
    try {
      if (kernels.backend !== 'webgpu') fail(`${upload}: started ${kernels.backend} (${kernels.fallbackReason})`);
      for (const c of cases) {
        const expected = referenceDecode(c.payload);
        const decoded = await kernels.decode(c.payload);
        report.checks++;
        if (decoded.backend !== 'webgpu') fail(`${upload} ${c.name}: decode ran on ${decoded.backend} (${decoded.fallbackReason})`);
        const wrong = firstMismatch(decoded.values, expected);
        if (wrong !== -1) fail(`${upload} ${c.name}: decode differs at ${wrong}`);
        const device = await kernels.decodeToDevice(c.payload);
        report.checks++;
        report.segments[`${upload} ${c.name}`] = device.segments.length;
        if (device.layout !== 'bf16' || device.location !== 'webgpu-buffer') fail(`${upload} ${c.name}: layout ${device.layout} at ${device.location}`);
        let next = 0;
        for (const segment of device.segments) {
          if (segment.firstElement !== next) fail(`${upload} ${c.name}: segment starts at ${segment.firstElement}, expected ${next}`);
          next += segment.elementCount;
          if (!(segment.handle instanceof GPUBuffer)) {
            fail(`${upload} ${c.name}: handle is not a GPUBuffer (${device.backend}: ${device.fallbackReason})`);
            continue;
          }
          const bytes = await readGpuBuffer(segment.handle);
          if (bytes.length !== Math.max(16, Math.ceil(segment.elementCount / 8) * 16)) fail(`${upload} ${c.name}: buffer of ${bytes.length} bytes for ${segment.elementCount} values`);
          const part = expected.subarray(segment.firstElement, segment.firstElement + segment.elementCount);
          const inBuffer = new Uint16Array(bytes.buffer, 0, segment.elementCount);
          const wrongAt = firstMismatch(inBuffer, part);
          if (wrongAt !== -1) fail(`${upload} ${c.name}: buffer value ${segment.firstElement + wrongAt} differs`);
          if (bytes.subarray(2 * segment.elementCount).some((b) => b !== 0)) fail(`${upload} ${c.name}: bytes past the last value are not 0`);
        }
        if (next !== expected.length) fail(`${upload} ${c.name}: segments cover ${next} of ${expected.length} values`);
        const back = await device.toArray();
        if (firstMismatch(back, expected) !== -1) fail(`${upload} ${c.name}: toArray differs`);
        device.delete();
      }
    } finally {
      await kernels.dispose();
    }
  }

  // The pieced readback with tiny pieces (8, 24 and 520 values; 1 to 3 staging buffers) on the
  // small cases (one value, three, six, empty, odd sizes, ...; chunks up to 4096 values; each
  // piece is a map round trip, so the tiniest only up to `most` values), several segments (64 KiB
  // buffers of 4096-value slices): decode and toArray bit-exact.
  const readbackConfigs = [
    [{ readbackPieceBytes: 16, readbackStagings: 1 }, 8192],
    [{ readbackPieceBytes: 48, readbackStagings: 2 }, 2 ** 17],
    [{ readbackPieceBytes: 1040, readbackStagings: 3 }, 2 ** 18],
  ];
  for (const [readback, most] of readbackConfigs) {
    const label = `readback pieces of ${readback.readbackPieceBytes} bytes, ${readback.readbackStagings} staging(s)`;
    const kernels = await createKernels({ backend: 'webgpu', webgpu: { sliceElements: 4096, maxBufferBytes: 2 ** 16, ...readback } });
    try {
      if (kernels.backend !== 'webgpu') fail(`${label}: started ${kernels.backend} (${kernels.fallbackReason})`);
      for (const c of cases.filter((k) => k.values.length < most && (k.chunkSize ?? 0) <= 4096)) {
        const expected = referenceDecode(c.payload);
        const decoded = await kernels.decode(c.payload);
        report.checks++;
        if (decoded.backend !== 'webgpu' || firstMismatch(decoded.values, expected) !== -1) fail(`${label}, ${c.name}: decode on ${decoded.backend} not bit-exact (${decoded.fallbackReason})`);
        const device = await kernels.decodeToDevice(c.payload);
        report.segments[`${label} ${c.name}`] = device.segments.length;
        const into = new Uint16Array(expected.length + 2).fill(0xabcd);
        const back = await device.toArray(into.subarray(1, 1 + expected.length));
        device.delete();
        report.checks++;
        if (firstMismatch(back, expected) !== -1 || into[0] !== 0xabcd || into[into.length - 1] !== 0xabcd) fail(`${label}, ${c.name}: toArray not bit-exact or wrote outside its target`);
      }
    } finally {
      await kernels.dispose();
    }
  }

  /** Format-v3 checksum segment cases, [name, values, codebook?, chunkSize?], shared with the device-checksum checks below. */
  let segmentCases = [];
  const kernels = await createKernels({ backend: 'webgpu' });
  try {
    // More than 2^24 values, default slices (several) and buffers.
    const huge = modelLike(hugeCount, 29);
    for (let i = 5; i < huge.length; i += 4099) huge[i] = (huge[i] & 0x807f) | (251 << 7);
    const hugePayload = encode(huge, calibrateCodebook(huge).codebook);
    const decoded = await kernels.decode(hugePayload);
    report.checks++;
    if (decoded.backend !== 'webgpu' || firstMismatch(decoded.values, huge) !== -1) fail(`${hugeCount} values: decode on ${decoded.backend} not bit-exact`);
    const device = await kernels.decodeToDevice(hugePayload);
    report.checks++;
    if (device.backend !== 'webgpu' || firstMismatch(await device.toArray(), huge) !== -1) fail(`${hugeCount} values: decodeToDevice not bit-exact`);
    device.delete();

    // Format v3 checksum segments (2^20 values): sizes that are not multiples of a segment or a
    // chunk, one segment, random (mostly escapes) data; a flipped sm byte in the LAST segment
    // (checksum field intact) rejects; the same payloads resealed as format v2 still decode.
    const segmentBook = calibrateCodebook(modelLike(1 << 16, 1)).codebook;
    segmentCases = [
      ['model-like 3*2^20+777 values', modelLike(3 * 2 ** 20 + 777, 51), undefined],
      ['random 3*2^20+777 values (mostly escapes), chunk 4096', escapeHeavy(3 * 2 ** 20 + 777, 53), segmentBook, 4096],
      ['one segment: random 300,007 values', escapeHeavy(300007, 55), segmentBook],
    ];
    for (const [name, values, book, chunkSize] of segmentCases) {
      const payload = encode(values, book ?? calibrateCodebook(values).codebook, chunkSize ? { chunkSize } : undefined);
      const meta = readPayloadMeta(payload);
      if (meta.version !== 3) fail(`${name}: payload version ${meta.version}, not 3`);
      for (const [label, p] of [['v3', payload], ['v2', convertPayloadVersion(payload, 2)]]) {
        const r = await kernels.decodeToDevice(p);
        report.checks++;
        if (r.backend !== 'webgpu' || firstMismatch(await r.toArray(), values) !== -1) fail(`${name} (${label}): decodeToDevice on ${r.backend} not bit-exact`);
        r.delete();
        const bad = p.slice();
        bad[meta.layout.sm.offsetBytes + (Math.ceil(values.length / 2 ** 20) - 1) * 2 ** 20 + 300] ^= 1;
        report.checks++;
        try {
          (await kernels.decodeToDevice(bad)).delete();
          fail(`${name} (${label}): a flipped sm byte in the last segment decoded`);
        } catch (error) {
          if (error?.code !== 'CHECKSUM_MISMATCH') fail(`${name} (${label}): ${error?.code ?? error} instead of CHECKSUM_MISMATCH`);
        }
      }
    }

    // A deleted result's buffer is reused for the next result of the same size, fully rewritten.
    const first = encode(modelLike(70001, 41), createCodebook([120, 121, 122]));
    const secondValues = modelLike(70001, 43);
    const second = encode(secondValues, calibrateCodebook(secondValues).codebook);
    const a = await kernels.decodeToDevice(first);
    const reusedBuffer = a.segments[0].handle;
    a.delete();
    const b = await kernels.decodeToDevice(second);
    report.checks++;
    if (a.backend !== 'webgpu' || b.backend !== 'webgpu') throw new Error(`reuse check ran on ${a.backend}, ${b.backend}: ${a.fallbackReason ?? b.fallbackReason}`);
    if (b.segments[0].handle !== reusedBuffer) fail('a deleted result buffer was not reused');
    const bBytes = await readGpuBuffer(b.segments[0].handle);
    if (firstMismatch(new Uint16Array(bBytes.buffer, 0, 70001), secondValues) !== -1 || bBytes.subarray(2 * 70001).some((x) => x !== 0)) {
      fail('the reused buffer does not hold exactly the second result');
    }
    b.delete();

    // Bad payloads: the codec's errors, reported in FORMAT.md's order, and the backend stays healthy.
    const small = modelLike(5000, 31);
    const book = createCodebook([127, 126, 125, 124]);
    for (let i = 0; i < small.length; i++) small[i] = (small[i] & 0x807f) | (book.exponents[i & 3] << 7);
    small[100] = (small[100] & 0x807f) | (3 << 7);
    const good = encode(small, book, { chunkSize: 64 });
    const { layout } = readPayloadMeta(good);
    const expectError = async (name, payload, options, code) => {
      report.checks++;
      try {
        const r = await kernels.decodeToDevice(payload, options);
        r.delete();
        fail(`${name}: decoded instead of ${code}`);
      } catch (error) {
        if (error?.code !== code) fail(`${name}: ${error?.code ?? error} instead of ${code}`);
      }
    };
    const flipped = good.slice();
    flipped[layout.sm.offsetBytes + 77] ^= 1;
    await expectError('sm byte flipped', flipped, undefined, 'CHECKSUM_MISMATCH');
    // The decode is submitted before the checksum is known: a failed checksum hands nothing out and
    // gives its output buffer back, so the next result of that size reuses it, fully rewritten.
    const held = await kernels.decodeToDevice(good);
    const heldBuffer = held.segments[0].handle;
    held.delete();
    await expectError('sm byte flipped, after a result was deleted', flipped, undefined, 'CHECKSUM_MISMATCH');
    const next = await kernels.decodeToDevice(good);
    report.checks++;
    if (next.segments[0].handle !== heldBuffer) fail('a failed checksum did not give its output buffer back to the pool');
    if (firstMismatch(await next.toArray(), small) !== -1) fail('after a failed checksum: decodeToDevice not bit-exact');
    next.delete();
    const badCode = good.slice();
    badCode[layout.codes.offsetBytes + 10] = 0x70;
    await expectError('code 7 with a 4-entry codebook, unverified', badCode, { verify: false }, 'INVALID_CODE');
    await expectError('code 7 with a 4-entry codebook, verified', badCode, undefined, 'CHECKSUM_MISMATCH');
    const badPosition = good.slice();
    badPosition[layout.escapePositions.offsetBytes] = 64;
    await expectError('escape position outside its chunk, unverified', badPosition, { verify: false }, 'BAD_ESCAPE_POSITION');
    const badIndex = good.slice();
    badIndex[layout.escapeIndex.offsetBytes + 4] = 9;
    await expectError('escape index past escape_count, unverified', badIndex, { verify: false }, 'BAD_ESCAPE_INDEX');
    await expectError('truncated', good.subarray(0, good.length - 256), undefined, 'TRUNCATED');
    const after = await kernels.decode(good);
    report.checks++;
    if (after.backend !== 'webgpu' || firstMismatch(after.values, small) !== -1) fail(`after bad payloads: decode on ${after.backend} (${after.fallbackReason})`);
  } finally {
    await kernels.dispose();
  }

  // The same format-v3 segment cases with the checksum on the host, then on the device (the
  // default, checksumOnDevice): the WGSL hash pass's digests must reproduce the checksum of every
  // good payload and reject the flipped byte, with one piece or many, per slice, another unroll.
  const onDevice = [
    ['host checksum (checksumOnDevice: false)', { checksumOnDevice: false }],
    ['device checksum, defaults', {}],
    ['device checksum, 2^20-value slices, 1 MiB pieces, unroll 3', { checksumOnDevice: true, sliceElements: 2 ** 20, uploadPieceBytes: 2 ** 20, checksumOnDeviceUnroll: 3 }],
    ['device checksum, write-buffer, 2^21-value slices', { checksumOnDevice: true, upload: 'write-buffer', sliceElements: 2 ** 21 }],
  ];
  for (const [label, options] of onDevice) {
    const deviceKernels = await createKernels({ backend: 'webgpu', webgpu: options });
    try {
      if (deviceKernels.backend !== 'webgpu') {
        fail(`${label}: started ${deviceKernels.backend} (${deviceKernels.fallbackReason})`);
        continue;
      }
      for (const [name, values, book, chunkSize] of segmentCases) {
        const payload = encode(values, book ?? calibrateCodebook(values).codebook, chunkSize ? { chunkSize } : undefined);
        const r = await deviceKernels.decodeToDevice(payload);
        report.checks++;
        if (r.backend !== 'webgpu' || firstMismatch(await r.toArray(), values) !== -1) fail(`${label}, ${name}: decodeToDevice on ${r.backend} not bit-exact (${r.fallbackReason})`);
        r.delete();
        const bad = payload.slice();
        bad[readPayloadMeta(payload).layout.sm.offsetBytes + (Math.ceil(values.length / 2 ** 20) - 1) * 2 ** 20 + 300] ^= 1;
        report.checks++;
        try {
          (await deviceKernels.decodeToDevice(bad)).delete();
          fail(`${label}, ${name}: a flipped sm byte in the last segment decoded`);
        } catch (error) {
          if (error?.code !== 'CHECKSUM_MISMATCH') fail(`${label}, ${name}: ${error?.code ?? error} instead of CHECKSUM_MISMATCH`);
        }
      }
    } finally {
      await deviceKernels.dispose();
    }
  }
  return report;
}

/** Median ms of `runs` calls after one warm-up. */
async function timeMedian(runs, fn) {
  await fn();
  const times = [];
  for (let r = 0; r < runs; r++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

/** Benchmark rows for bench/run-bench.mjs: decode and encode GB/s (BF16 bytes) next to a copy. */
async function runBench(backend, elementCount, runs) {
  const values = modelLike(elementCount, 23);
  const { codebook } = calibrateCodebook(values);
  const payload = encode(values, codebook);
  const kernels = await createKernels({ backend });
  try {
    const out = new Uint16Array(elementCount);
    const copy = new Uint16Array(elementCount);
    const copyMs = await timeMedian(runs, async () => copy.set(values));
    const decodeMs = await timeMedian(runs, async () => {
      const r = await kernels.decode(payload, out);
      if (r.backend !== backend) throw new Error(`decode ran on ${r.backend}: ${r.fallbackReason}`);
    });
    if (firstMismatch(out, values) !== -1) throw new Error('bench decode is not bit-exact');
    const deviceMs = await timeMedian(runs, async () => {
      const r = await kernels.decodeToDevice(payload);
      r.delete();
    });
    const encodeMs = await timeMedian(runs, async () => {
      const r = await kernels.encode(values, codebook);
      if (r.backend !== backend) throw new Error(`encode ran on ${r.backend}: ${r.fallbackReason}`);
    });
    return { backend, elementCount, copyMs, decodeMs, deviceMs, encodeMs, started: kernels.backend };
  } finally {
    await kernels.dispose();
  }
}

/** Outcome of a promise as a plain string: 'resolved' or the error's code (its name when it has none). */
async function settle(promise) {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, code: (error && error.code) || (error && error.name) || String(error) };
  }
}

/** Rejects after `ms` naming what was waited for: a missing browser event must not hang the page. */
function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Probe findings that only a browser shows: a lost WebGL context, concurrent webgpu encodes,
 * a restored WebGL context, dispose during a webgpu encode, decode or toArray, a lost WebGPU
 * device, a GL device result read after dispose. Small tensors (one 2^22 + 3 decode).
 */

/** A kernels instance of `backend`, and the GL contexts it created (gpu.js keeps them to itself). */
async function createKernelsSeeingContexts(backend) {
  const contexts = [];
  const original = HTMLCanvasElement.prototype.getContext;
  HTMLCanvasElement.prototype.getContext = function (...args) {
    const context = original.apply(this, args);
    if (context && !contexts.includes(context)) contexts.push(context);
    return context;
  };
  try {
    return { kernels: await createKernels({ backend }), contexts };
  } finally {
    HTMLCanvasElement.prototype.getContext = original;
  }
}

async function runProbeChecks() {
  const report = { checks: 0, failures: [] };
  const fail = (message) => report.failures.push(message);
  const values = modelLike(4097, 3);
  const book = calibrateCodebook(values).codebook;
  const payload = encode(values, book);

  for (const backend of ['webgl2', 'webgl']) {
    // A lost context (the browser drops the oldest past ~16 live ones): every call falls back, never zeros.
    for (const first of ['encode', 'decode', 'decodeToDevice']) {
      const { kernels, contexts } = await createKernelsSeeingContexts(backend);
      try {
        if (kernels.backend !== backend) fail(`${backend}: started ${kernels.backend}`);
        for (const context of contexts) context.getExtension('WEBGL_lose_context')?.loseContext();
        if (!contexts.some((c) => c.isContextLost())) fail(`${backend}: no context was lost (${contexts.length} captured)`);
        let got;
        if (first === 'encode') {
          const r = await kernels.encode(values, book);
          got = firstMismatch(r.payload, payload) === -1 && r.payload.length === payload.length ? null : 'wrong payload';
          if (r.backend !== 'codec' || !/lost/.test(r.fallbackReason ?? '')) got = `ran on ${r.backend} (${r.fallbackReason})`;
        } else if (first === 'decode') {
          const r = await kernels.decode(payload);
          got = firstMismatch(r.values, values) === -1 ? null : 'wrong values';
          if (r.backend !== 'codec' || !/lost/.test(r.fallbackReason ?? '')) got = `ran on ${r.backend} (${r.fallbackReason})`;
        } else {
          const r = await kernels.decodeToDevice(payload);
          const back = await r.toArray();
          r.delete();
          got = firstMismatch(back, values) === -1 ? null : 'wrong values';
          if (r.backend !== 'codec' || !/lost/.test(r.fallbackReason ?? '')) got = `ran on ${r.backend} (${r.fallbackReason})`;
        }
        report.checks++;
        if (got) fail(`${backend} lost context, ${first}: ${got}`);
        if (kernels.availableBackends.includes(backend)) fail(`${backend} lost context, ${first}: still listed`);
      } finally {
        await kernels.dispose();
      }
    }

    // A context the page restored (preventDefault on the loss event) answers isContextLost() false
    // again but holds none of the instance's programs or textures: still a failure for good, never
    // zeros, for later calls and for a device result made before the loss.
    {
      const { kernels, contexts } = await createKernelsSeeingContexts(backend);
      try {
        const before = await kernels.decode(payload);
        if (before.backend !== backend || firstMismatch(before.values, values) !== -1) fail(`${backend} restored context: the first decode ran on ${before.backend}`);
        const held = await kernels.decodeToDevice(payload);
        // Extensions first: a lost context's getExtension returns null.
        const lose = [...contexts].map((c) => [c, c.getExtension('WEBGL_lose_context')]).filter(([, ext]) => ext);
        const events = (type, prevent) =>
          withTimeout(
            Promise.all(lose.map(([c]) => new Promise((resolve) => c.canvas.addEventListener(type, (e) => { if (prevent) e.preventDefault(); resolve(); }, { once: true })))),
            10_000,
            `${backend} ${type}`,
          );
        const lost = events('webglcontextlost', true);
        for (const [, ext] of lose) ext.loseContext();
        await lost;
        // Past the event's dispatch: its default counts as prevented only once every listener ran.
        await new Promise((resolve) => setTimeout(resolve, 0));
        const restored = events('webglcontextrestored', false);
        for (const [, ext] of lose) ext.restoreContext();
        await restored;
        if (lose.length === 0 || [...contexts].some((c) => c.isContextLost())) fail(`${backend} restored context: ${lose.length} context(s) lost and restored`);
        const r = await kernels.decode(payload);
        report.checks++;
        if (r.backend !== 'codec' || !/lost/.test(r.fallbackReason ?? '') || firstMismatch(r.values, values) !== -1) {
          fail(`${backend} restored context, decode: ran on ${r.backend} (${r.fallbackReason}), values ${firstMismatch(r.values, values) === -1 ? 'right' : 'wrong'}`);
        }
        const d = await kernels.decodeToDevice(payload);
        const back = await settle(d.toArray());
        report.checks++;
        if (d.backend !== 'codec' || !/lost/.test(d.fallbackReason ?? '') || !back.ok || firstMismatch(back.value, values) !== -1) {
          fail(`${backend} restored context, decodeToDevice: ran on ${d.backend} (${d.fallbackReason}), toArray ${back.ok ? (firstMismatch(back.value, values) === -1 ? 'right' : 'wrong values') : back.code}`);
        }
        const old = await settle(held.toArray());
        report.checks++;
        if (old.ok || old.code !== 'KERNEL_FAILED') fail(`${backend} restored context, toArray of a result made before the loss: ${old.ok ? (firstMismatch(old.value, values) === -1 ? 'right values' : 'wrong values') : old.code}`);
      } finally {
        await kernels.dispose();
      }
    }

    // A device result read after its instance was disposed: DISPOSED, never zeros or a TypeError.
    for (const readFirst of [true, false]) {
      const kernels = await createKernels({ backend });
      const device = await kernels.decodeToDevice(payload);
      if (readFirst) await device.toArray();
      await kernels.dispose();
      const r = await settle(device.toArray());
      report.checks++;
      if (r.ok || r.code !== 'DISPOSED') fail(`${backend} toArray after dispose (read first: ${readFirst}): ${r.ok ? 'resolved' : r.code}`);
    }
  }

  // webgpu (gpu.js encode kernels): concurrent encodes each get their own payload.
  const kernels = await createKernels({ backend: 'webgpu' });
  try {
    const a = modelLike(1 << 16, 21);
    const b = modelLike(1 << 16, 22);
    const bookA = calibrateCodebook(a).codebook;
    const [ra, rb] = await Promise.all([kernels.encode(a, bookA), kernels.encode(b, bookA)]);
    report.checks++;
    for (const [name, r, v] of [['A', ra, a], ['B', rb, b]]) {
      const want = encode(v, bookA);
      if (r.backend !== 'webgpu') fail(`webgpu concurrent encode ${name}: ran on ${r.backend} (${r.fallbackReason})`);
      if (r.payload.length !== want.length || firstMismatch(r.payload, want) !== -1) fail(`webgpu concurrent encode ${name}: wrong payload`);
    }
  } finally {
    await kernels.dispose();
  }
  // dispose during an encode (a fresh instance): the call resolves with the right payload or rejects DISPOSED.
  const disposing = await createKernels({ backend: 'webgpu' });
  const big = modelLike(1 << 17, 23);
  const bigBook = calibrateCodebook(big).codebook;
  const pending = settle(disposing.encode(big, bigBook));
  await disposing.dispose();
  const r = await pending;
  report.checks++;
  if (r.ok) {
    const want = encode(big, bigBook);
    if (r.value.backend !== 'webgpu') fail(`webgpu dispose during encode: ran on ${r.value.backend} (${r.value.fallbackReason})`);
    if (r.value.payload.length !== want.length || firstMismatch(r.value.payload, want) !== -1) fail(`webgpu dispose during encode: resolved a wrong payload (${r.value.backend})`);
  } else if (r.code !== 'DISPOSED') fail(`webgpu dispose during encode: ${r.code}`);

  // dispose during a native decode (two default slices) and during a toArray: the call finishes
  // on live buffers or rejects DISPOSED; never a fallback blaming the device, never a bare DOMException.
  const decodeValues = modelLike(2 ** 22 + 3, 25);
  const decodePayload = encode(decodeValues, calibrateCodebook(decodeValues).codebook);
  const decoding = await createKernels({ backend: 'webgpu' });
  const inFlight = settle(decoding.decode(decodePayload));
  await decoding.dispose();
  const d = await inFlight;
  report.checks++;
  if (d.ok) {
    if (d.value.backend !== 'webgpu' || d.value.fallbackReason !== null) fail(`webgpu dispose during decode: ran on ${d.value.backend} (${d.value.fallbackReason})`);
    if (firstMismatch(d.value.values, decodeValues) !== -1) fail('webgpu dispose during decode: wrong values');
  } else if (d.code !== 'DISPOSED') fail(`webgpu dispose during decode: ${d.code}`);
  const reading = await createKernels({ backend: 'webgpu' });
  const held = await reading.decodeToDevice(payload);
  const toArray = settle(held.toArray());
  await reading.dispose();
  const t = await toArray;
  report.checks++;
  if (t.ok ? firstMismatch(t.value, values) !== -1 : t.code !== 'DISPOSED') fail(`webgpu dispose during toArray: ${t.ok ? 'wrong values' : t.code}`);

  // A lost device (page code destroyed gpu.js's shared device; the next acquire makes a new one):
  // toArray of a result made before is KERNEL_FAILED, not the device's bare AbortError. Last: it
  // ends the device the instances above shared.
  const losing = await createKernels({ backend: 'webgpu' });
  try {
    const result = await losing.decodeToDevice(payload);
    await GPU.WebGPUContext.destroy();
    const lostRead = await settle(result.toArray());
    report.checks++;
    if (lostRead.ok || lostRead.code !== 'KERNEL_FAILED') fail(`webgpu toArray after the device was lost: ${lostRead.ok ? 'resolved' : lostRead.code}`);
  } finally {
    await losing.dispose();
  }
  return report;
}

window.runChecks = runChecks;
window.runWebGpuChecks = runWebGpuChecks;
window.runBench = runBench;
window.runProbeChecks = runProbeChecks;
window.pageReady = true;
