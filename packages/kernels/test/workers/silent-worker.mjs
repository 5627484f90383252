// A decode worker that starts (sets its ready flag) but never answers a job: a wedged worker.
import { workerData } from 'node:worker_threads';
const ready = new Int32Array(workerData.ready);
Atomics.store(ready, 0, 1);
Atomics.notify(ready, 0);
setInterval(() => {}, 1000);
