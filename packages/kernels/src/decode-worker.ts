// Worker body of the worker-thread decoder: claims chunk ranges of a payload held in a
// SharedArrayBuffer and decodes them into a shared output. The escape index makes chunks independent.
import { parentPort } from 'node:worker_threads';
import { isSplitZipError, readPayloadMeta } from '@splitzip/codec';
import { CONTROL_CLAIMED, decodeClaimedTasks } from './decode-claimed-tasks.js';
import type { DecodeJob, DecodeJobReply } from './worker-protocol.js';

const port = parentPort;
if (port) {
  port.on('message', (job: DecodeJob) => {
    let reply: DecodeJobReply;
    const control = new Int32Array(job.control);
    // Every task already taken (the caller may have finished alone and reused its staging
    // buffers since): touch nothing.
    if (Atomics.load(control, CONTROL_CLAIMED) >= job.taskCount) {
      port.postMessage({ id: job.id, ok: true } satisfies DecodeJobReply);
      return;
    }
    try {
      const payload = new Uint8Array(job.payload, job.payloadOffset, job.payloadLength);
      const meta = readPayloadMeta(payload);
      const out = new Uint16Array(job.out, job.outOffset, meta.elementCount);
      decodeClaimedTasks(payload, meta, out, control, job.taskCount);
      reply = { id: job.id, ok: true };
    } catch (error) {
      reply = {
        id: job.id,
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
