// Worker body of the worker-thread decoder. It does not wait on its event loop: it sleeps in
// Atomics.wait on a shared doorbell and takes messages with receiveMessageOnPort, so it wakes within
// a futex wake-up of the caller's ring instead of a message dispatch (which, measured, took longer
// than decoding 2^24 values on the caller alone). Each job claims chunk ranges of a payload held
// in shared memory and decodes them into a shared output (the escape index makes chunks
// independent; the first thread to claim it also checks the checksum), or, for a format-v3
// payload, segment ranges that it decodes and hashes in one pass (or only hashes). Payloads and
// outputs in a codec arena this worker attached are decoded in place by the codec's WebAssembly
// kernels.
import { receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import { attachCodecArena, isSplitZipError, type CodecArenaShare, type PayloadMeta } from '@splitzip/codec';
import { collectGarbage } from './collect-garbage.js';
import { createMetaReader } from './create-meta-reader.js';
import { CONTROL_CLAIMED, CONTROL_FAILED, claimVerify, decodeClaimedTasks, runVerify, waitReady } from './decode-claimed-tasks.js';
import type { BufferRef, DecodeJob, DecodeJobReply, WorkerMessage, WorkerStart } from './worker-protocol.js';

/** This thread's view of each attached arena's memory (only views of it decode in place here). */
const arenas = new Map<number, SharedArrayBuffer>();
/** Why an arena could not be attached here: reported by the jobs that use it. */
const attachErrors = new Map<number, unknown>();
/** Jobs of one loader repeat a few headers: the last one's meta is reused when the bytes match. */
const readMeta = createMetaReader();

function bufferOf(ref: BufferRef): SharedArrayBuffer {
  if ('shared' in ref) return ref.shared;
  const buffer = arenas.get(ref.arena);
  if (buffer === undefined) throw attachErrors.get(ref.arena) ?? new Error(`arena ${ref.arena} is not attached in this worker`);
  return buffer;
}

function attach(id: number, share: CodecArenaShare): void {
  try {
    arenas.set(id, attachCodecArena(share).buffer);
  } catch (error) {
    attachErrors.set(id, error);
  }
}

function runJob(job: DecodeJob): DecodeJobReply {
  const control = new Int32Array(job.control);
  try {
    let payload: Uint8Array | null = null;
    let meta: PayloadMeta | null = null;
    // Views are made only after something was claimed: a job the caller finished alone may have
    // had its buffers reused since.
    const ready = job.ready && new Int32Array(job.ready);
    if (job.kind === 'chunks' && job.verify && claimVerify(control)) {
      payload = new Uint8Array(bufferOf(job.payload), job.payloadOffset, job.payloadLength);
      meta = readMeta(payload);
      // A payload still being copied in is hashed once its last range is in.
      if (ready && !waitReady(ready, job.taskCount - 1, control)) return { id: job.id, ok: true };
      // Failed meanwhile (abandoned, disposed, or another thread's error, which the caller then
      // checks against the checksum itself): no whole-payload hash for a job no one will take.
      if (Atomics.load(control, CONTROL_FAILED) !== 0) return { id: job.id, ok: true };
      runVerify(payload, meta, control, job.taskCount, job.doneTarget);
    }
    if (Atomics.load(control, CONTROL_CLAIMED) >= job.taskCount) return { id: job.id, ok: true };
    payload ??= new Uint8Array(bufferOf(job.payload), job.payloadOffset, job.payloadLength);
    meta ??= readMeta(payload);
    const out = job.kind === 'digests' ? null : new Uint16Array(bufferOf(job.out), job.outOffset, meta.elementCount);
    const work = {
      kind: job.kind,
      digests: job.digests && new Uint32Array(job.digests),
      gate: job.gate ? new Int32Array(job.gate) : null,
      doneTarget: job.doneTarget,
      outerTask: job.outerTask === true,
    };
    decodeClaimedTasks(payload, meta, out, control, job.taskCount, work, undefined, ready);
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
  const ready = new Int32Array(start.ready);
  Atomics.store(ready, 0, 1);
  Atomics.notify(ready, 0);
  let seen = 0;
  let detached = false;
  for (;;) {
    Atomics.wait(doorbell, 0, seen);
    seen = Atomics.load(doorbell, 0);
    for (let message = receiveMessageOnPort(jobs); message; message = receiveMessageOnPort(jobs)) {
      const m = message.message as WorkerMessage;
      if ('stop' in m) process.exit(0);
      else if ('attach' in m) attach(m.attach, m.share);
      else if ('detach' in m) {
        arenas.delete(m.detach);
        attachErrors.delete(m.detach);
        detached = true;
      }
      else replies.postMessage(runJob(m));
    }
    // Idle now: the detached arenas' memory is freed only once this thread collects (see collect-garbage.ts).
    if (detached) {
      detached = false;
      collectGarbage();
    }
  }
}
