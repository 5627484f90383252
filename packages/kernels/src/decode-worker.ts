// Worker body of the worker-thread decoder. It does not wait on its event loop: it sleeps in
// Atomics.wait on a shared doorbell and takes jobs with receiveMessageOnPort, so it wakes within
// a futex wake-up of the caller's ring instead of a message dispatch (which, measured, took longer
// than decoding 2^24 values on the caller alone). Each job claims chunk ranges of a payload held
// in a SharedArrayBuffer and decodes them into a shared output; the escape index makes chunks
// independent.
import { receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import { isSplitZipError, readPayloadMeta } from '@splitzip/codec';
import { CONTROL_CLAIMED, decodeClaimedTasks } from './decode-claimed-tasks.js';
import type { DecodeJob, DecodeJobReply, WorkerStart } from './worker-protocol.js';

function runJob(job: DecodeJob): DecodeJobReply {
  const control = new Int32Array(job.control);
  // Every task already taken (the caller may have finished alone and reused its staging
  // buffers since): touch nothing.
  if (Atomics.load(control, CONTROL_CLAIMED) >= job.taskCount) return { id: job.id, ok: true };
  try {
    const payload = new Uint8Array(job.payload, job.payloadOffset, job.payloadLength);
    const meta = readPayloadMeta(payload);
    const out = new Uint16Array(job.out, job.outOffset, meta.elementCount);
    decodeClaimedTasks(payload, meta, out, control, job.taskCount);
    return { id: job.id, ok: true };
  } catch (error) {
    return {
      id: job.id,
      ok: false,
      error: {
        message: error instanceof Error ? error.message : String(error),
        splitZipCode: isSplitZipError(error) ? error.code : null,
        details: isSplitZipError(error) ? error.details : {},
      },
    };
  }
}

const start = workerData as WorkerStart | null;
if (start) {
  const doorbell = new Int32Array(start.doorbell);
  const jobs: MessagePort = start.jobs;
  const replies: MessagePort = start.replies;
  let seen = 0;
  for (;;) {
    Atomics.wait(doorbell, 0, seen);
    seen = Atomics.load(doorbell, 0);
    for (let message = receiveMessageOnPort(jobs); message; message = receiveMessageOnPort(jobs)) {
      const job = message.message as DecodeJob | { stop: true };
      if ('stop' in job) process.exit(0);
      replies.postMessage(runJob(job));
    }
  }
}
