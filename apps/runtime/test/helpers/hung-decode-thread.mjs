// A decode thread (createThreadDecoder's workerUrl) that says it is ready and never answers a job:
// a read that never returns (the decoder has no job watchdog). One that has been sent a read-decode
// job exits once the test posts on the BroadcastChannel HUNG_THREAD_EXIT_CHANNEL: a holder of a
// staging slot that dies, letting go of it.
import { BroadcastChannel, parentPort } from 'node:worker_threads';

let holdsRead = false;
// The exit may be posted before the job it is meant for arrives here (the main thread took the slot
// for this worker, the job is still in flight): remembered, so the worker exits on that job. Until
// 2026-12-07 it was lost and the worker held the slot for ever (CI: 1 run in 3 on a loaded 2-core VM).
let exitAsked = false;
const channel = new BroadcastChannel('splitzip-test-hung-thread-exit');
channel.onmessage = () => {
  exitAsked = true;
  if (holdsRead) process.exit(1);
};
parentPort.on('message', (message) => {
  if (message.kind !== 'read-decode-verify') return;
  holdsRead = true;
  if (exitAsked) process.exit(1);
});
parentPort.postMessage({ kind: 'ready' });
