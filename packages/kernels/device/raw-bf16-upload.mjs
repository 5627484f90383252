// The baseline of issue #4's device-resident target: the raw BF16 tensor (2 bytes per value)
// uploaded into a storage buffer as it is, with each of the upload methods the native decoder
// can use, so the comparison is like for like. Buffers are kept across calls (as the decoder keeps
// its own). Each call returns ms until the queue drained. Used by h200-bench.mjs only.

const USAGE = { MAP_WRITE: 0x2, COPY_SRC: 0x4, COPY_DST: 0x8, STORAGE: 0x80 };
const PIECE_BYTES = 4 << 20;
/** Pieces of the kept-staging method, as the decoder's mapped-staging upload (16 MiB). */
const STAGING_PIECE_BYTES = 16 << 20;
const now = () => performance.now();

export const RAW_UPLOAD_METHODS = [
  'writeBuffer, one call',
  'writeBuffer, 4 MiB pieces',
  'mapped staging (kept) + copy',
  'mapped staging (kept), 16 MiB pieces + copies',
];

export function createRawBf16Uploader(device) {
  let target = null;
  let staging = null;
  let stagingMapped = Promise.resolve(false);
  /** The pieced method's kept staging buffers, one per piece. */
  const pieces = [];
  const ensureTarget = (bytes) => {
    if (!target || target.size < bytes) {
      target?.destroy();
      target = device.createBuffer({ size: bytes, usage: USAGE.STORAGE | USAGE.COPY_DST });
    }
  };
  return {
    async upload(values, method) {
      const bytes = Math.max(16, Math.ceil(values.byteLength / 16) * 16);
      const source = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
      ensureTarget(bytes);
      const t = now();
      if (method === RAW_UPLOAD_METHODS[0]) {
        device.queue.writeBuffer(target, 0, source, 0, Math.floor(source.length / 4) * 4);
      } else if (method === RAW_UPLOAD_METHODS[1]) {
        for (let at = 0; at < source.length; at += PIECE_BYTES) {
          const size = Math.floor(Math.min(PIECE_BYTES, source.length - at) / 4) * 4;
          if (size > 0) device.queue.writeBuffer(target, at, source, at, size);
          device.queue.submit([]);
        }
      } else if (method === RAW_UPLOAD_METHODS[3]) {
        // Each piece is copied on the device while the next is filled (as the decoder does).
        for (let k = 0, at = 0; at < bytes; k++, at += STAGING_PIECE_BYTES) {
          const size = Math.min(STAGING_PIECE_BYTES, bytes - at);
          let piece = pieces[k];
          if (!piece || piece.buffer.size < size || !(await piece.mapped)) {
            piece?.buffer.destroy();
            piece = { buffer: device.createBuffer({ size: STAGING_PIECE_BYTES, usage: USAGE.MAP_WRITE | USAGE.COPY_SRC, mappedAtCreation: true }), mapped: null };
            pieces[k] = piece;
          }
          new Uint8Array(piece.buffer.getMappedRange(0, size)).set(source.subarray(at, Math.min(source.length, at + size)));
          piece.buffer.unmap();
          const encoder = device.createCommandEncoder();
          encoder.copyBufferToBuffer(piece.buffer, 0, target, at, size);
          device.queue.submit([encoder.finish()]);
          const kept = piece.buffer;
          piece.mapped = kept.mapAsync(0x2).then(() => true, () => false);
        }
      } else {
        if (!staging || staging.size < bytes || !(await stagingMapped)) {
          staging?.destroy();
          staging = device.createBuffer({ size: bytes, usage: USAGE.MAP_WRITE | USAGE.COPY_SRC, mappedAtCreation: true });
        }
        new Uint8Array(staging.getMappedRange(0, bytes)).set(source);
        staging.unmap();
        const encoder = device.createCommandEncoder();
        encoder.copyBufferToBuffer(staging, 0, target, 0, bytes);
        device.queue.submit([encoder.finish()]);
        const kept = staging;
        stagingMapped = kept.mapAsync(0x2).then(() => true, () => false);
      }
      await device.queue.onSubmittedWorkDone();
      return now() - t;
    },
    destroy() {
      target?.destroy();
      staging?.destroy();
      for (const piece of pieces) piece.buffer.destroy();
    },
  };
}

/** Device-resident timing keys reported by the alternating rows. */
export const DEVICE_RESIDENT_KEYS = ['totalMs', 'validateMs', 'prepareMs', 'uploadMs', 'kernelMs'];
const medianOf = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * `rounds` rounds, each the raw upload of `values` by `method`, then a device-resident decode of
 * `payload` (its result freed): { rawMs, timings } with the median of each DEVICE_RESIDENT_KEYS.
 */
export async function alternateRawAndDeviceResident(uploader, kernels, values, payload, method, rounds) {
  const raws = [];
  const decodes = [];
  for (let r = 0; r < rounds; r++) {
    raws.push(await uploader.upload(values, method));
    const result = await kernels.decodeToDevice(payload);
    decodes.push(result.timings);
    result.delete();
  }
  const timings = Object.fromEntries(DEVICE_RESIDENT_KEYS.map((k) => [k, medianOf(decodes.map((t) => t[k] ?? 0))]));
  return { rawMs: medianOf(raws), timings };
}
