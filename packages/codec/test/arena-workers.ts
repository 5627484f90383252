// Worker threads attached to one shared codec arena, for the tests that run the codec on several
// threads at once. Each worker imports the built package (dist), attaches to the arena when sent
// its share (answering `{ zeroCopy }`), and answers every other message `job` with what
// `handleJob` (the body of a function of codec, arena and job) returns, or `{ ok: false, message }`.
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CodecArena } from '../src/index.js';

/** The built package the workers import: tests that use them check it exists first. */
export const CODEC_DIST_URL = new URL('../dist/index.js', import.meta.url);
export const CODEC_DIST_PATH = fileURLToPath(CODEC_DIST_URL);

function arenaWorkerSource(handleJob: string): string {
  return `
    const { parentPort } = require('node:worker_threads');
    import(${JSON.stringify(CODEC_DIST_URL.href)}).then((codec) => {
      let arena;
      const handle = (codec, arena, job) => { ${handleJob} };
      parentPort.on('message', (job) => {
        try {
          if (job.share) { arena = codec.attachCodecArena(job.share); parentPort.postMessage({ zeroCopy: arena.zeroCopy }); return; }
          parentPort.postMessage(handle(codec, arena, job));
        } catch (error) { parentPort.postMessage({ ok: false, message: String(error) }); }
      });
    });`;
}

export interface ArenaWorkers {
  readonly workers: Worker[];
  /** Posts `message` to `worker` and resolves with its reply. */
  ask(worker: Worker, message: object): Promise<Record<string, unknown>>;
  /** Each worker's `zeroCopy` answer to its arena share, in worker order. */
  attach(): Promise<unknown[]>;
  terminate(): Promise<void>;
}

export function startArenaWorkers(handleJob: string, arena: CodecArena, count: number): ArenaWorkers {
  const source = arenaWorkerSource(handleJob);
  const workers = Array.from({ length: count }, () => new Worker(source, { eval: true }));
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
