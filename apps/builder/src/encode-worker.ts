// Worker-thread entry: hashes, calibrates and encodes the tensors the main thread hands it, one at
// a time. The raw bytes arrive by transfer (no copy) and stay here until the main thread decides
// (after the content-key lookup) whether to encode or to drop them.
import { parentPort, workerData } from 'node:worker_threads';
import { createValuesEncoder, type EncodeBackend } from './create-values-encoder.js';
import { analyzeTensor, encodeTensor } from './tensor-tasks.js';
import type { WorkerReply, WorkerRequest } from './worker-messages.js';
import { serializeError } from './worker-messages.js';

const port = parentPort;
if (!port) throw new Error('encode-worker must run in a worker thread');
const { backend } = workerData as { backend: EncodeBackend };

const encoderReady = createValuesEncoder(backend);
let held: { id: number; bytes: Uint8Array; exponents: number[] | null; chunkSize: number } | null = null;

function reply(message: WorkerReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

encoderReady.then(
  (encoder) => reply({ type: 'ready', backend: encoder.backend, fallbackReason: encoder.fallbackReason }),
  (error: unknown) => reply({ type: 'error', id: -1, error: serializeError(error) }),
);

port.on('message', (request: WorkerRequest) => {
  void handle(request);
});

async function handle(request: WorkerRequest): Promise<void> {
  try {
    switch (request.type) {
      case 'analyze': {
        const bytes = new Uint8Array(request.buffer, 0, request.byteLength);
        const analysis = analyzeTensor(bytes, request.shape);
        held = { id: request.id, bytes, exponents: analysis.exponents, chunkSize: request.chunkSize };
        reply({ type: 'analyzed', id: request.id, analysis });
        return;
      }
      case 'encode': {
        if (!held || held.id !== request.id || !held.exponents) throw new Error(`encode of tensor job ${request.id} without its bytes`);
        const encoder = await encoderReady;
        const { payload, sha256 } = await encodeTensor(held.bytes, held.exponents, held.chunkSize, encoder.encode);
        held = null;
        // Transfer the payload's buffer; a view on a larger buffer is copied out first.
        const owned =
          payload.byteOffset === 0 && payload.byteLength === payload.buffer.byteLength ? payload : payload.slice();
        reply(
          { type: 'encoded', id: request.id, payload: owned.buffer as ArrayBuffer, payloadBytes: owned.byteLength, sha256 },
          [owned.buffer as ArrayBuffer],
        );
        return;
      }
      case 'drop':
        if (held?.id === request.id) held = null;
        return;
    }
  } catch (error) {
    held = null;
    reply({ type: 'error', id: request.id, error: serializeError(error) });
  }
}
