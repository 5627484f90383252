import { isSplitZipError, readPayloadMeta, SplitZipError } from '@splitzip/codec';
import type { BackendImpl } from './backend-impl.js';
import { checkOutput } from './check-output.js';
import type { WebGpuDecoder } from './create-webgpu-decoder.js';
import { isKernelsError, KernelsError } from './errors.js';
import { emptyTimings } from './timings.js';

const now = (): number => performance.now();

/**
 * The `webgpu` backend: decode and decodeToDevice run the native WGSL decoder (the payload bytes
 * uploaded as they are, BF16 out); encode stays gpu.js's webgpu kernels (`encoder`), on the same
 * device (gpu.js's shared WebGPU context).
 */
export function createWebGpuBackendImpl(decoder: WebGpuDecoder, encoder: BackendImpl): BackendImpl {
  return {
    name: 'webgpu',

    async decode(payload, out, options) {
      const timings = emptyTimings();
      const start = now();
      const meta = readPayloadMeta(payload);
      const target = checkOutput(out, meta.elementCount);
      await decoder.decodeToHost(payload, target, options?.verify !== false, timings);
      timings.totalMs = now() - start;
      return { backend: 'webgpu', fallbackReason: null, values: target, timings };
    },

    async decodeToDevice(payload, options) {
      const timings = emptyTimings();
      const start = now();
      const { elementCount } = readPayloadMeta(payload);
      const outputs = await decoder.decodeToDevice(payload, options?.verify !== false, timings);
      timings.totalMs = now() - start;
      let deleted = false;
      return {
        backend: 'webgpu',
        fallbackReason: null,
        elementCount,
        location: 'webgpu-buffer',
        layout: 'bf16',
        segments: outputs.map((o) => ({ firstElement: o.firstElement, elementCount: o.elementCount, handle: o.buffer })),
        timings,
        async toArray<TBuffer extends ArrayBufferLike = ArrayBuffer>(target?: Uint16Array<TBuffer>): Promise<Uint16Array<TBuffer>> {
          if (deleted) throw new KernelsError('DISPOSED', 'this device result was deleted', {});
          const values = checkOutput(target, elementCount);
          try {
            await decoder.readBack(outputs, values);
          } catch (error) {
            // `out` transferred or shrunk while we read: the caller's error, as on the GL path.
            if (values.length < elementCount) {
              throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${values.length} values, ${elementCount} needed (detached or resized during the call)`, {
                argument: 'out',
                outLength: values.length,
                needed: elementCount,
              });
            }
            if (isKernelsError(error) || isSplitZipError(error)) throw error;
            // A lost device rejects the mapping with a bare DOMException (AbortError): typed here,
            // as every other failure of this package is.
            throw decoder.disposed
              ? new KernelsError('DISPOSED', 'the Kernels instance of this device result was disposed', {}, { cause: error })
              : new KernelsError('KERNEL_FAILED', `WebGPU readback failed: ${error instanceof Error ? error.message : String(error)}`, { backend: 'webgpu' }, { cause: error });
          }
          return values;
        },
        delete() {
          if (deleted) return;
          deleted = true;
          // The buffers go back to the decoder, which reuses them for later results.
          decoder.release(outputs);
        },
      };
    },

    encode(values, codebook, options) {
      return encoder.encode(values, codebook, options);
    },

    async dispose() {
      await decoder.dispose();
      await encoder.dispose();
    },
  };
}
