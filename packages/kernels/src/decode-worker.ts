// Worker body of the worker-thread decoder: decodes a range of chunks of a payload held in a
// SharedArrayBuffer into a shared output. The escape index makes chunks independent.
import { parentPort } from 'node:worker_threads';
import { decodeChunks, isSplitZipError, readPayloadMeta } from '@splitzip/codec';
import type { DecodeTask, DecodeTaskReply } from './worker-protocol.js';

const port = parentPort;
if (port) {
  port.on('message', (task: DecodeTask) => {
    let reply: DecodeTaskReply;
    try {
      const payload = new Uint8Array(task.payload, task.payloadOffset, task.payloadLength);
      const meta = readPayloadMeta(payload);
      const firstValue = task.firstChunk * meta.chunkSize;
      const count = Math.min(meta.elementCount, (task.firstChunk + task.chunkCount) * meta.chunkSize) - firstValue;
      const out = new Uint16Array(task.out, task.outOffset + 2 * firstValue, count);
      decodeChunks(payload, meta, task.firstChunk, task.chunkCount, out);
      reply = { id: task.id, ok: true };
    } catch (error) {
      reply = {
        id: task.id,
        ok: false,
        error: {
          message: error instanceof Error ? error.message : String(error),
          splitZipCode: isSplitZipError(error) ? error.code : null,
          details: isSplitZipError(error) ? error.details : {},
        },
      };
    }
    port.postMessage(reply);
  });
}
