// Worker body of the runtime's thread decoder (createThreadDecoder): verifies a payload's checksum
// or decodes a chunk range of it, payload and output both in SharedArrayBuffers (no copies).
import { parentPort } from 'node:worker_threads';
import { decodeChunks, readPayloadMeta, verifyPayloadChecksum } from '@splitzip/codec';

export interface DecodeThreadJob {
  id: number;
  kind: 'checksum' | 'decode';
  payload: SharedArrayBuffer;
  payloadOffset: number;
  payloadLength: number;
  out?: SharedArrayBuffer;
  /** Byte offset of the first chunk's first value in `out`. */
  outOffset?: number;
  firstChunk?: number;
  chunkCount?: number;
}

export type DecodeThreadReply =
  | { id: number; ok: true; busyMs: number }
  | { id: number; ok: false; error: { code: string; message: string } };

const port = parentPort;
if (port) {
  port.on('message', (job: DecodeThreadJob) => {
    let reply: DecodeThreadReply;
    const startMs = performance.now();
    try {
      const payload = new Uint8Array(job.payload, job.payloadOffset, job.payloadLength);
      const meta = readPayloadMeta(payload);
      if (job.kind === 'checksum') {
        verifyPayloadChecksum(payload, meta);
      } else {
        const firstChunk = job.firstChunk ?? 0;
        const chunkCount = job.chunkCount ?? meta.chunkCount;
        const start = firstChunk * meta.chunkSize;
        const count = Math.max(0, Math.min(meta.elementCount, (firstChunk + chunkCount) * meta.chunkSize) - start);
        decodeChunks(payload, meta, firstChunk, chunkCount, new Uint16Array(job.out as SharedArrayBuffer, job.outOffset ?? 0, count));
      }
      reply = { id: job.id, ok: true, busyMs: performance.now() - startMs };
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      reply = {
        id: job.id,
        ok: false,
        error: { code: typeof code === 'string' ? code : 'WORKER_ERROR', message: error instanceof Error ? error.message : String(error) },
      };
    }
    port.postMessage(reply);
  });
}
