import { decode, encode } from '@splitzip/codec';
import type { BackendImpl } from './backend-impl.js';
import { checkOutput } from './check-output.js';
import { KernelsError } from './errors.js';
import { emptyTimings } from './timings.js';

const now = (): number => performance.now();

/** The codec's own CPU path (WebAssembly SIMD or tuned JS): the `codec` backend and the fallback. */
export function createCodecBackend(): BackendImpl {
  let disposed = false;
  return {
    name: 'codec',
    async decode(payload, out, options) {
      const timings = emptyTimings();
      const t = now();
      const values = decode(payload, out, options?.verify === false ? { verify: false } : undefined);
      timings.kernelMs = timings.totalMs = now() - t;
      return { backend: 'codec', fallbackReason: null, values, timings };
    },
    async encode(values, codebook, options) {
      const timings = emptyTimings();
      const t = now();
      const payload = encode(values, codebook, options?.chunkSize === undefined ? undefined : { chunkSize: options.chunkSize });
      timings.kernelMs = timings.totalMs = now() - t;
      return { backend: 'codec', fallbackReason: null, payload, timings };
    },
    async decodeToDevice(payload, options) {
      const { values, timings } = await this.decode(payload, undefined, options);
      let deleted = false;
      return {
        backend: 'codec',
        fallbackReason: null,
        elementCount: values.length,
        location: 'host',
        layout: 'bf16',
        segments: [{ firstElement: 0, elementCount: values.length, handle: values }],
        timings,
        // The same contract as the GPU backends' results: a typed error for a wrong or short `out`
        // (a Uint8Array took each value's low byte before) and for a deleted result.
        async toArray<TBuffer extends ArrayBufferLike = ArrayBuffer>(out?: Uint16Array<TBuffer>): Promise<Uint16Array<TBuffer>> {
          if (deleted) throw new KernelsError('DISPOSED', 'this device result was deleted', {});
          // The values are on the host and would still read, but a result must not outlive its
          // instance on one backend only: code tested on codec would break on a GPU backend.
          if (disposed) throw new KernelsError('DISPOSED', 'the Kernels instance of this device result was disposed', {});
          if (out === undefined) return values.slice() as Uint16Array as Uint16Array<TBuffer>;
          const target = checkOutput(out, values.length);
          target.set(values);
          return target;
        },
        delete() {
          deleted = true;
        },
      };
    },
    async dispose() {
      disposed = true;
    },
  };
}
