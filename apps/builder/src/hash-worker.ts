// Worker-thread entry: calibrates the tensors the main thread hands it (exponent histogram, Top-16
// codebook, coverage, and the SHA-256 of a tensor that passes the gate), one request at a time.
// The raw bytes arrive by transfer (no copy) and go straight back with the answer. The main thread
// computes the content key first (the store lives there), so only tensors not yet cached come here.
// Encoding happens on the main thread: its payload buffers come from one pool and are reused.
import { parentPort } from 'node:worker_threads';
import { calibrateTensor } from './tensor-tasks.js';
import { serializeError, type WorkerReply, type WorkerRequest } from './worker-messages.js';

const port = parentPort;
if (!port) throw new Error('hash-worker must run in a worker thread');

function reply(message: WorkerReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

port.on('message', (request: WorkerRequest) => {
  const buffer = request.buffer;
  try {
    if (request.type !== 'calibrate') throw new Error(`unknown request ${String((request as { type?: unknown }).type)}`);
    const calibration = calibrateTensor(new Uint8Array(buffer, 0, request.byteLength), request.coverageMin);
    // Shared memory stays where it is (the main thread holds it); an ArrayBuffer goes back.
    if (buffer instanceof ArrayBuffer) reply({ type: 'calibrated', id: request.id, calibration, buffer }, [buffer]);
    else reply({ type: 'calibrated', id: request.id, calibration });
  } catch (error) {
    const back = buffer instanceof ArrayBuffer && buffer.byteLength > 0 ? buffer : undefined;
    reply({ type: 'error', id: request.id, error: serializeError(error), ...(back ? { buffer: back } : {}) }, back ? [back] : []);
  }
});
reply({ type: 'ready' });
