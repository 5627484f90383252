// Worker-thread entry: keys and calibrates the tensors the main thread hands it (content key;
// exponent histogram, Top-16 codebook, coverage) and, on the codec path, encodes them and, for an
// s3:// cache, takes the payload's SHA-256, one request at a time. Tensors and payloads are
// ranges of the build's slab (shared memory, received once, before any request): read and written
// in place. The content key (SHA-1) is a request of its own, answered first: the main thread,
// where the store lives, then sends only the tensors not yet cached back for calibrating.
import { parentPort } from 'node:worker_threads';
import { computeContentKey } from '@splitzip/store/content-key';
import { attachSlab } from './create-slab-pool.js';
import { calibrateAndEncode } from './tensor-tasks.js';
import { serializeError, type WorkerReply, type WorkerRequest } from './worker-messages.js';

const port = parentPort;
if (!port) throw new Error('hash-worker must run in a worker thread');
let slab: SharedArrayBuffer | null = null;

function reply(message: WorkerReply): void {
  port!.postMessage(message);
}

port.on('message', (request: WorkerRequest) => {
  if (request.type === 'slab') {
    // In a codec arena this also binds this thread's kernels to it: encoding runs in place.
    slab = attachSlab(request.share);
    return;
  }
  try {
    if (slab === null) throw new Error(`${String(request.type)} request before the slab`);
    if (request.type === 'key') {
      const bytes = new Uint8Array(slab, request.offsetBytes, request.byteLength);
      reply({ type: 'keyed', id: request.id, key: computeContentKey(bytes, request.shape, 'BF16') });
      return;
    }
    if (request.type !== 'calibrate') throw new Error(`unknown request ${String((request as { type?: unknown }).type)}`);
    const into = request.encodeInto;
    const { payload, payloadDigest, ...calibration } = calibrateAndEncode(
      new Uint8Array(slab, request.offsetBytes, request.byteLength),
      request.coverageMin,
      into ? { out: new Uint8Array(slab, into.offsetBytes, into.byteLength), chunkSize: into.chunkSize, digest: into.digest } : undefined,
    );
    reply({ type: 'calibrated', id: request.id, calibration, payloadBytes: payload ? payload.byteLength : null, payloadDigest });
  } catch (error) {
    reply({ type: 'error', id: request.id, error: serializeError(error) });
  }
});
reply({ type: 'ready' });
