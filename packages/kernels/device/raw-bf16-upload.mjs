// The baseline of issue #4's device-resident target: the raw BF16 tensor (2 bytes per value)
// uploaded into a storage buffer as it is, with each of the upload methods the native decoder
// can use, so the comparison is like for like. Buffers are kept across calls (as the decoder keeps
// its own). Each call returns ms until the queue drained. Used by h200-bench.mjs only.

const USAGE = { MAP_WRITE: 0x2, COPY_SRC: 0x4, COPY_DST: 0x8, STORAGE: 0x80 };
const PIECE_BYTES = 4 << 20;
const now = () => performance.now();

export const RAW_UPLOAD_METHODS = ['writeBuffer, one call', 'writeBuffer, 4 MiB pieces', 'mapped staging (kept) + copy'];

export function createRawBf16Uploader(device) {
  let target = null;
  let staging = null;
  let stagingMapped = Promise.resolve(false);
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
    },
  };
}
