// Worker-thread entry: hashes and calibrates the tensors the main thread hands it, one at a time.
// The raw bytes arrive by transfer (no copy). For a tensor the main thread expects to be new, one
// request does both (hash, then calibrate) and the buffer goes straight back; otherwise the bytes
// stay here until the main thread's verdict after its content-key lookup: `calibrate` or `drop`.
// Encoding happens on the main thread: its payload buffers then come from one malloc arena and
// are reused, where per-thread arenas each kept their own high-water mark (measured: +40-60 MB).
import { parentPort } from 'node:worker_threads';
import { calibrateTensor, hashTensor } from './tensor-tasks.js';
import { serializeError, type WorkerReply, type WorkerRequest } from './worker-messages.js';

const port = parentPort;
if (!port) throw new Error('hash-worker must run in a worker thread');
let held: { id: number; buffer: ArrayBuffer; bytes: Uint8Array } | null = null;

function reply(message: WorkerReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

function take(id: number): { buffer: ArrayBuffer; bytes: Uint8Array } {
  if (!held || held.id !== id) throw new Error(`tensor job ${id} is not held by this worker`);
  const job = held;
  held = null;
  return job;
}

port.on('message', (request: WorkerRequest) => {
  let buffer: ArrayBuffer | undefined;
  try {
    switch (request.type) {
      case 'hash': {
        buffer = request.buffer;
        const bytes = new Uint8Array(request.buffer, 0, request.byteLength);
        const key = hashTensor(bytes, request.shape);
        if (request.coverageMin !== undefined) {
          const calibration = calibrateTensor(bytes, request.coverageMin);
          reply({ type: 'hashed', id: request.id, key, calibration, buffer: request.buffer }, [request.buffer]);
          return;
        }
        held = { id: request.id, buffer: request.buffer, bytes };
        reply({ type: 'hashed', id: request.id, key });
        return;
      }
      case 'calibrate': {
        const job = take(request.id);
        buffer = job.buffer;
        const calibration = calibrateTensor(job.bytes, request.coverageMin);
        reply({ type: 'calibrated', id: request.id, calibration, buffer: job.buffer }, [job.buffer]);
        return;
      }
      case 'drop': {
        const job = take(request.id);
        reply({ type: 'dropped', id: request.id, buffer: job.buffer }, [job.buffer]);
        return;
      }
    }
  } catch (error) {
    if (held?.buffer === buffer) held = null;
    const back = buffer && buffer.byteLength > 0 ? buffer : undefined;
    reply({ type: 'error', id: request.id, error: serializeError(error), ...(back ? { buffer: back } : {}) }, back ? [back] : []);
  }
});
reply({ type: 'ready' });
