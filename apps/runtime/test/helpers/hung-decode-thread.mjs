// A decode thread (createThreadDecoder's workerUrl) that says it is ready and never answers a job:
// a read that never returns (the decoder has no job watchdog). One that has been sent a read-decode
// job exits once the test posts on the BroadcastChannel HUNG_THREAD_EXIT_CHANNEL: a holder of a
// staging slot that dies, letting go of it.
import { BroadcastChannel, parentPort } from 'node:worker_threads';

let holdsRead = false;
const channel = new BroadcastChannel('splitzip-test-hung-thread-exit');
channel.onmessage = () => {
  if (holdsRead) process.exit(1);
};
parentPort.on('message', (message) => {
  if (message.kind === 'read-decode-verify') holdsRead = true;
});
parentPort.postMessage({ kind: 'ready' });
