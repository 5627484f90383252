// Worker threads attached to one shared codec arena, for the tests that run the codec on several
// threads at once: each worker evaluates `workerCode`, which must answer a `{ share }` message
// (attachCodecArena) with `{ zeroCopy }` and any other message with one reply.
import { Worker } from 'node:worker_threads';
import type { CodecArena } from '../src/index.js';

export interface ArenaWorkers {
  readonly workers: Worker[];
  /** Posts `message` to `worker` and resolves with its reply. */
  ask(worker: Worker, message: object): Promise<Record<string, unknown>>;
  /** Each worker's `zeroCopy` answer to its arena share, in worker order. */
  attach(): Promise<unknown[]>;
  terminate(): Promise<void>;
}

export function startArenaWorkers(workerCode: string, arena: CodecArena, count: number): ArenaWorkers {
  const workers = Array.from({ length: count }, () => new Worker(workerCode, { eval: true }));
  const ask = (worker: Worker, message: object) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.postMessage(message);
    });
  return {
    workers,
    ask,
    attach: async () => (await Promise.all(workers.map((worker, i) => ask(worker, { share: arena.share(i) })))).map((a) => a.zeroCopy),
    terminate: async () => {
      await Promise.all(workers.map((worker) => worker.terminate()));
    },
  };
}
