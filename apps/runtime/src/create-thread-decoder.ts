import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { countPayloadSegments, decode, decodeSegments, SEGMENT_DIGESTS, SEGMENT_VALUES, verifySegmentDigests, type CodecArena, type PayloadMeta } from '@splitzip/codec';
import type { DecodeBackend, DecodedBuffer, HashedContentKey, OpenedPayloadFile, ReadDecodeRequest, ReadDecodeResult, ReadDecodeStaging, StagingLease } from './create-cpu-decoder.js';
import type { DecodeThreadJob, DecodeThreadMessage, DecodeThreadReady, DecodeThreadReply, SharedRef } from './decode-thread.js';
import { argumentError, checkOptionsArgument, optionNames } from './check-load-arguments.js';
import { abortedError, isRuntimeError, RuntimeError, type RuntimeErrorCode } from './errors.js';
import { markSettlingBackend } from './settling-backends.js';
import { takeTurnIfDue } from './take-turn-if-due.js';
import { startWorker } from '@splitzip/kernels/start-worker';
import { findWorkerScriptProblem } from '@splitzip/kernels/worker-decoder';

/**
 * Decode threads by default: one per core, at most 4 (decode is memory-bound beyond that). The
 * loading thread needs no core of its own for a local cache: its blobs are read on the decode
 * threads (readDecode), and a 1.07 GB model loaded from the page cache at 0.47-0.54x raw with two
 * threads on 2 cores against 0.32-0.34x with one. Until 2026-12-04 the loading thread read every
 * blob and kept a core for that (cores - 1 threads).
 */
export const DEFAULT_DECODE_THREADS = Math.max(1, Math.min(availableParallelism(), 4));

/** Tensors with fewer values go to one thread whole; larger ones are split across the threads. */
export const DEFAULT_SPLIT_MIN_VALUES = 1 << 20;

/**
 * Tensors with fewer values are decoded on the calling thread. A round trip to a worker (message,
 * waking a sleeping thread, the answer a tick later) costs about as much as decoding 2^20 values
 * in place (~0.15 ms idle, more on a busy machine), and many such round trips add up to the whole
 * load of a model made of small tensors: the default model through the 1 GB/s pacing reader
 * loaded 1.12-1.40x faster than raw with 2^20 (median 1.25x over 13 runs), 0.85x with 2^16. 2^21
 * (0.7 ms on the calling thread) takes the default model's 2.05M-value embeddings off the worker:
 * read near the end of the load, its hand-off was the load's tail (paced, burst-free: cache load
 * 12.4-13.1 ms against 13.9-15.9 with 2^20, three A/B pairs on the busy 2-core box, tail
 * 0.2-0.4 ms against 1.4-1.8); the 1.07 GB model's tensors are all above it.
 */
export const DEFAULT_INLINE_MAX_VALUES = 1 << 21;

/**
 * While no worker has started yet (the first ~50-100 ms of a process: thread start, module load),
 * tensors below this many values are decoded on the calling thread instead of waiting: 2^22 values
 * take a few milliseconds there. Larger ones wait for a worker (a long decode would stall the
 * calling thread's reads).
 */
export const DEFAULT_STARTUP_INLINE_MAX_VALUES = 1 << 22;

/**
 * The calling thread decodes at most this many values of a verified format-v3 tensor that goes to
 * idle workers (its last segments, an even share otherwise), while they decode the rest: whole
 * segments of 2^20 values, at most as long as an inline decode holds the event loop.
 */
export const DEFAULT_CALLER_SHARE_MAX_VALUES = 1 << 20;

/**
 * Tensors of fewer bytes are hashed (hashContentKey) on the calling thread: a round trip to a
 * worker costs about as much as hashing 128-256 KiB there (SHA-1 at ~1.2 GB/s on this VM), and a
 * hash of 1 MiB holds the calling thread under a millisecond.
 */
export const DEFAULT_HASH_INLINE_MAX_BYTES = 1024 * 1024;

/**
 * A tensor outside shared memory goes to its hashing thread in pieces of this size, copied
 * through shared scratch, two at a time: the copy of one (~0.5 ms) while the thread hashes the
 * other (~3.5 ms), and no more memory than two pieces whatever the tensor's size.
 */
export const HASH_PIECE_BYTES = 4 * 1024 * 1024;

/**
 * Read-decode jobs a worker holds at once: the one it runs and the next, so that it goes from one
 * to the next without waiting for the loading thread (see pumpQueued).
 */
export const READ_JOBS_PER_WORKER = 2;

export interface ThreadDecoderOptions {
  threads?: number | undefined;
  splitMinValues?: number | undefined;
  /** Decode tensors below this many values on the calling thread (default DEFAULT_INLINE_MAX_VALUES). */
  inlineMaxValues?: number | undefined;
  /** Until a worker is ready, decode tensors below this many values on the calling thread (default DEFAULT_STARTUP_INLINE_MAX_VALUES; 0: always wait). */
  startupInlineMaxValues?: number | undefined;
  /** Values of a verified v3 tensor the calling thread decodes beside the workers, at most (default DEFAULT_CALLER_SHARE_MAX_VALUES; below 2^20, one segment: never). */
  callerShareMaxValues?: number | undefined;
  /** Read-decode jobs handed to one worker at once (default READ_JOBS_PER_WORKER). */
  readJobsPerWorker?: number | undefined;
  /** hashContentKey leaves tensors below this many bytes to the calling thread (default DEFAULT_HASH_INLINE_MAX_BYTES). */
  hashInlineMaxBytes?: number | undefined;
  /** The worker script (default: decode-thread.js beside the built module). */
  workerUrl?: URL | undefined;
}

export interface ThreadDecoderStats {
  jobs: number;
  /** Scratch SharedArrayBuffers allocated (payloads or outputs not already in shared memory). */
  scratchAllocations: number;
  /** Tensors whose payload the workers read in place from a codec arena they attached to. */
  arenaDecodes: number;
  /** Tensors decoded on the calling thread (small ones, and those that arrived before any worker was ready). */
  inlineDecodes: number;
  /** Tensors the calling thread decoded a share of (segments) beside the workers. */
  callerShares: number;
  /** Tensors a worker read from their blob file and decoded (readDecode). */
  threadReads: number;
  /** Tensors sent to a worker to hash to their content key (hashContentKey; one whose worker failed is hashed again by the caller). */
  threadHashes: number;
  /** Workers started (ready or still loading). */
  startedThreads: number;
  /** Workers started and taking jobs. */
  readyThreads: number;
}

export interface ThreadDecoder extends DecodeBackend {
  readonly shared: true;
  /** True once close() was called (warmUp and loads given it refuse it: INVALID_ARGUMENT). */
  readonly closed: boolean;
  readonly verifiesChecksum: true;
  /** Worker threads (each attaches to a codec arena with its own scratch area, see createCodecArena's `threads`). */
  readonly threads: number;
  stats(): ThreadDecoderStats;
  /** See DecodeBackend.readDecode: a worker reads the blob file and decodes it at once. */
  readDecode(request: ReadDecodeRequest): Promise<ReadDecodeResult> | undefined;
  /** See DecodeBackend.hashContentKey: a worker hashes the bytes, in place when they are in shared memory. */
  hashContentKey(bytes: Uint8Array, prefix: string): Promise<HashedContentKey> | undefined;
  /** Stops the workers; reads still queued are rejected. */
  close(): Promise<void>;
  /**
   * Starts the workers now and resolves once all of them take jobs (a server can call this at
   * startup so that its first load decodes in parallel from the first tensor).
   */
  warmUp(): Promise<void>;
}

/** A finished job: its CPU time, and the segment digests a decode-segments job computed. */
interface JobDone {
  busyMs: number;
  /** A read-decode-verify job's time reading the blob (not in busyMs). */
  readMs?: number | undefined;
  digests?: Uint32Array | undefined;
  /** A read-decode-verify job without `out`: the values, in a buffer the worker allocated. */
  values?: ArrayBuffer | undefined;
  /** A hash job's content key (the last piece's). */
  key?: string | undefined;
}

interface PoolWorker {
  worker: Worker;
  busy: number;
  /** Which of the arena's scratch areas this worker uses (arena.share(slot)); unique among live workers. */
  slot: number;
  /** Arenas this worker has been sent (attach messages precede jobs on the same port, so order holds). */
  attached: Set<number>;
  /** The worker's module has loaded (it said so): jobs sent now start at once. */
  ready: boolean;
  /** The staging slot this worker reads blobs into, kept across its consecutive read-decode jobs. */
  lease: { source: object; slot: StagingLease } | undefined;
  /** Settles once the worker is ready or gone (close waits for it: see CLOSE_STARTUP_WAIT_MS). */
  started: Promise<void>;
}

/**
 * close() lets a worker that is still loading its modules finish (up to this long) before it is
 * terminated: Node leaks the descriptors of the module files a worker terminated mid-load had
 * open (seen on Node 20: a decoder closed 30 ms after start left ~1 fd a cycle, for good).
 */
export const CLOSE_STARTUP_WAIT_MS = 2000;

/** A read-decode job waiting for a worker; it holds no file yet. */
interface QueuedRead {
  request: ReadDecodeRequest;
  resolve: (result: ReadDecodeResult) => void;
  reject: (error: unknown) => void;
  /** performance.now() when it was queued: its slot wait's deadline counts from here at the earliest. */
  queuedAt: number;
}

/**
 * A timer fires on the event loop's cached clock, which may run up to a millisecond behind
 * performance.now(): a read queued that little after the one a timed-out take was for has waited
 * its full slotWaitMs too, and is failed with it rather than given a take of a millisecond.
 */
const TIMER_SLACK_MS = 1;

/**
 * A read's POOL_WAIT_TIMEOUT, restated as its own: the pool's slotWaitMs (the take may have asked
 * for only what the oldest read had left) and the wait its deadline counted, in the message and
 * the details.
 */
function readWaitTimeoutError(error: RuntimeError, slotWaitMs: number, waitedMs: number): RuntimeError {
  const message = error.message.replace(`slotWaitMs (${String(error.details.slotWaitMs)} ms)`, `slotWaitMs (${slotWaitMs} ms)`);
  return new RuntimeError('POOL_WAIT_TIMEOUT', message, { ...error.details, slotWaitMs, waitedMs: Math.round(waitedMs) });
}

/** [first, end) ranges cutting `count` units into min(parts, count) runs of near-equal length. */
function splitEvenly(count: number, parts: number): [number, number][] {
  const runs = Math.min(parts, count);
  const ranges: [number, number][] = [];
  for (let k = 0; k < runs; k += 1) ranges.push([Math.floor((k * count) / runs), Math.floor(((k + 1) * count) / runs)]);
  return ranges;
}

/** Whether the built worker script exists (it does in the published package; not in a bundle that left it out). */
export function hasThreadWorker(): boolean {
  hasWorkerScript ??= existsSync(fileURLToPath(defaultWorkerUrl()));
  return hasWorkerScript;
}

/**
 * Looked up once per process: `'auto'` is resolved on every load, and the two file checks cost a
 * paced load of the default model ~0.06 ms of its start (measure-paced-stages.mjs --ab-stream).
 */
let workerUrl: URL | undefined;
let hasWorkerScript: boolean | undefined;

function defaultWorkerUrl(): URL {
  if (workerUrl !== undefined) return workerUrl;
  const beside = new URL('./decode-thread.js', import.meta.url);
  // Running from src/ (tests): the built worker. Only there: from a bundle, <bundle dir>/../dist/
  // is unrelated to this package, and a failure naming it sent users looking in the wrong place.
  const fromSource = import.meta.url.endsWith('.ts') && !existsSync(fileURLToPath(beside));
  workerUrl = fromSource ? new URL('../dist/decode-thread.js', import.meta.url) : beside;
  return workerUrl;
}

/**
 * Why no decode thread can start when the default worker script is missing: where it was looked
 * for, and what to pass instead (a bundle that inlined the runtime leaves it out).
 */
export function describeMissingThreadWorker(): string {
  return (
    `the runtime's worker script decode-thread.js is not at ${fileURLToPath(defaultWorkerUrl())} (beside the runtime's module; ` +
    `a bundle that inlined @splitzip/runtime leaves it out): keep @splitzip/runtime external to the bundle, or pass ` +
    `backend: createThreadDecoder({ workerUrl: new URL(import.meta.resolve('@splitzip/runtime/decode-thread')) })`
  );
}

/** How much of a failed start's reason the backend's name carries (a stack-free message's first line fits). */
const MAX_START_FAILURE_CHARS = 160;

/**
 * Refuses a `workerUrl` that is not a URL, or a `file:` URL of no file: every worker would die at
 * start, and until 2026-12-07 each tensor of 2^21 values and more was then served raw
 * (`DECODE_FAILED`) under a backend named as a healthy one. The kernels' rule (checkScriptFile):
 * one stat, a file (a directory was taken, as `existsSync` holds for it), in the
 * `<option> must be <what>, got <value>` form (details.option, details.got; workerUrl, path).
 */
function checkWorkerUrl(url: unknown): void {
  if (url === undefined) return;
  if (!(url instanceof URL)) {
    throw argumentError('workerUrl', "a URL (Node's Worker takes a string as a path)", url);
  }
  if (url.protocol !== 'file:') return;
  // The kernels' worker decoder's rule (one function), in this package's words and error class.
  const problem = findWorkerScriptProblem(url);
  if (problem === undefined) return;
  const why =
    problem.reason === 'not-local'
      ? `it names no local file: ${problem.message}`
      : problem.reason === 'unreadable'
        ? `it names no file that can be read: ${problem.code} ${problem.path}`
        : `it names something that is not a file: ${problem.path}`;
  const { message, details } = argumentError('workerUrl', `the worker script's file: URL, new URL(import.meta.resolve('@splitzip/runtime/decode-thread'))`, url.href, ` (${why})`);
  throw new RuntimeError('INVALID_ARGUMENT', message, { ...details, workerUrl: url.href, ...(problem.reason === 'not-local' ? {} : { path: problem.path }) });
}

/** The bytes of a job that sends none (a hash stream's discard). */
const NO_BYTES = new SharedArrayBuffer(0);

/** Where a view's bytes live for the workers, if they can reach them without a copy. */
type Placement = { ref: SharedRef; offset: number } | undefined;

/**
 * A decode on the calling thread, in one pass, returning its CPU ms. A verified format-v3 payload
 * of several segments is decoded segment by segment (each hashed as it is decoded, the digests
 * combined at the end: the same work as one pass), with a turn of the event loop between two
 * segments when one is due (takeTurnIfDue): a 2^21-value decode into fresh memory held the loading
 * thread 4-16 ms under concurrent loads on this VM (page faults of ~1.5-3 ms a MiB).
 */
async function decodeInline(payload: Uint8Array, meta: PayloadMeta, out: Uint16Array, verify: boolean): Promise<number> {
  let busyMs = 0;
  let startMs = performance.now();
  if (!verify || meta.version < 3 || meta.elementCount <= SEGMENT_VALUES) {
    decode(payload, out, { verify });
    return performance.now() - startMs;
  }
  const segmentCount = countPayloadSegments(payload, meta);
  const digests = new Uint32Array(SEGMENT_DIGESTS * segmentCount);
  for (let k = 0; k < segmentCount; k++) {
    if (k > 0) {
      busyMs += performance.now() - startMs;
      for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
      startMs = performance.now();
    }
    decodeSegments(payload, meta, k, k + 1, out.subarray(k * SEGMENT_VALUES), { digests: digests.subarray(k * SEGMENT_DIGESTS) });
  }
  verifySegmentDigests(payload, meta, digests);
  return busyMs + performance.now() - startMs;
}

/**
 * The runtime's worker-thread decode backend: the payload's checksum and the decode of its chunk
 * ranges run on `threads` worker threads, so the calling thread stays free to issue and complete
 * reads (this is what keeps a paced link busy). Payload and output are shared memory, best a codec
 * arena (the staging pool's, which loadModel creates with a scratch area per thread): the workers
 * attach to it once and the WebAssembly kernels then read the payload and write the output in
 * place. A plain SharedArrayBuffer works too (the kernels copy blocks through their scratch area);
 * anything else is copied into reused shared scratch buffers. Workers start on the first decode
 * and never keep the process alive.
 */
const THREAD_DECODER_OPTIONS = optionNames<ThreadDecoderOptions>({
  threads: true,
  splitMinValues: true,
  inlineMaxValues: true,
  startupInlineMaxValues: true,
  callerShareMaxValues: true,
  readJobsPerWorker: true,
  hashInlineMaxBytes: true,
  workerUrl: true,
});

export function createThreadDecoder(options: ThreadDecoderOptions = {}): ThreadDecoder {
  checkOptionsArgument(options, THREAD_DECODER_OPTIONS);
  const threads = options.threads ?? DEFAULT_DECODE_THREADS;
  if (!Number.isSafeInteger(threads) || threads < 1 || threads > 64) {
    throw argumentError('threads', 'a whole number in 1..64', threads);
  }
  checkWorkerUrl(options.workerUrl);
  const splitMinValues = options.splitMinValues ?? DEFAULT_SPLIT_MIN_VALUES;
  const inlineMaxValues = options.inlineMaxValues ?? DEFAULT_INLINE_MAX_VALUES;
  const startupInlineMaxValues = options.startupInlineMaxValues ?? DEFAULT_STARTUP_INLINE_MAX_VALUES;
  const callerShareMaxValues = options.callerShareMaxValues ?? DEFAULT_CALLER_SHARE_MAX_VALUES;
  const readJobsPerWorker = options.readJobsPerWorker ?? READ_JOBS_PER_WORKER;
  const hashInlineMaxBytes = options.hashInlineMaxBytes ?? DEFAULT_HASH_INLINE_MAX_BYTES;
  if (!Number.isSafeInteger(readJobsPerWorker) || readJobsPerWorker < 1 || readJobsPerWorker > 64) {
    throw argumentError('readJobsPerWorker', 'a whole number in 1..64', readJobsPerWorker);
  }
  for (const [name, value] of Object.entries({ splitMinValues, inlineMaxValues, startupInlineMaxValues, callerShareMaxValues, hashInlineMaxBytes })) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw argumentError(name, 'a whole number >= 0', value);
    }
  }
  const pool: PoolWorker[] = [];
  /** `source`: a read-decode job's, into a staging slot of that source (its answer is progress on the source's reads). */
  const pending = new Map<number, { resolve: (done: JobDone) => void; reject: (error: Error) => void; owner: PoolWorker; source?: object }>();
  const scratch: SharedArrayBuffer[] = [];
  // Arena ids: a WeakMap so a dropped arena is not kept alive here; the registry tells the workers
  // to drop theirs once it is collected.
  const arenaIds = new WeakMap<CodecArena, number>();
  const forget = new FinalizationRegistry<number>((arenaId) => {
    for (const entry of pool) {
      if (entry.attached.delete(arenaId)) entry.worker.postMessage({ kind: 'detach', arenaId } satisfies DecodeThreadMessage);
    }
  });
  const readQueue: QueuedRead[] = [];
  // Staging slots taken for queued reads that no worker holds yet, and the takes still waiting for
  // one, by source (see takeSlot).
  const spareSlots: { source: object; slot: StagingLease }[] = [];
  const slotsTaking = new Map<object, number>();
  /** Each source's slot wait, ended once no read of it is queued (or at close). */
  const slotTakers = new Map<object, AbortController>();
  /**
   * Each source's slotWaitMs, learned from its first POOL_WAIT_TIMEOUT: later takes wait only what
   * the read they are for has left of it (a WeakMap: the shared decoder outlives pools).
   */
  const slotWaitOf = new WeakMap<object, number>();
  /**
   * Since when the threads have waited for a slot of a source with no progress on its reads, one
   * take after another: from the first take's start (whether or not a worker holds a slot of it),
   * moved to now whenever a worker finishes a read of the source; ended when a slot comes, or when
   * no take of it is left. A read's slotWaitMs counts only this wait: not the time it waited for a
   * busy worker, nor a slot this decoder's own worker held while it served the pool's reads. A
   * worker whose read of the source never returns serves none: the wait goes on counting, through
   * one take after another (earlier on 2026-12-07 a take begun while a worker held a slot failed
   * no read: the reads queued behind a hung one waited for ever), and so does a wait whose holder
   * let go of its slot meanwhile (its take's wait was not counted, nor its timeout felt, and the
   * next take's clock started afresh: up to twice slotWaitMs).
   */
  const slotWaitSince = new Map<object, number>();
  let nextArenaId = 1;
  let nextId = 1;
  let jobs = 0;
  let scratchAllocations = 0;
  let arenaDecodes = 0;
  let inlineDecodes = 0;
  let callerShares = 0;
  let threadReads = 0;
  let threadHashes = 0;
  let nextStream = 1;
  let closed = false;
  // warmUp() callers, settled whenever a worker becomes ready or dies.
  let readyWaiters: (() => void)[] = [];
  // Workers that died before they were ready (a missing or broken worker script): warmUp gives up.
  let startFailures = 0;
  let lastStartError: Error | undefined;
  const wakeReadyWaiters = () => {
    const waiters = readyWaiters;
    readyWaiters = [];
    for (const wake of waiters) wake();
  };

  const spawn = (): PoolWorker => {
    const used = new Set(pool.map((w) => w.slot));
    let slot = 0;
    while (used.has(slot)) slot += 1;
    let markStarted!: () => void;
    const started = new Promise<void>((resolve) => (markStarted = resolve));
    const entry: PoolWorker = { worker: startWorker(options.workerUrl ?? defaultWorkerUrl()), busy: 0, slot, attached: new Set(), ready: false, lease: undefined, started };
    entry.worker.on('message', (reply: DecodeThreadReply | DecodeThreadReady) => {
      if ('kind' in reply) {
        entry.ready = true;
        markStarted();
        wakeReadyWaiters();
        pumpReads();
        return;
      }
      const task = pending.get(reply.id);
      if (!task) return;
      pending.delete(reply.id);
      entry.busy -= 1;
      // A read of the source finished: the threads are serving its reads (see slotWaitSince).
      if (task.source !== undefined && slotWaitSince.has(task.source)) slotWaitSince.set(task.source, performance.now());
      // The next read first: it reaches the worker sooner, and finds it still awake.
      pumpReads();
      if (reply.ok) task.resolve({ busyMs: reply.busyMs, readMs: reply.readMs, digests: reply.digests, values: reply.values, key: reply.key });
      else if (reply.error.details !== undefined) task.reject(new RuntimeError(reply.error.code as RuntimeErrorCode, reply.error.message, reply.error.details));
      else task.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
    });
    let died = false;
    const die = (cause: Error) => {
      // The default script missing: say where it was looked for and what to pass, not only
      // "Cannot find module …" (once: 'error' and 'exit' both land here).
      const error = !died && !entry.ready && options.workerUrl === undefined && !hasThreadWorker() ? new Error(`${cause.message}: ${describeMissingThreadWorker()}`) : cause;
      // 'error' then 'exit' both land here: the first one says why.
      if (!died && !entry.ready) {
        startFailures += 1;
        lastStartError = error;
        if (!pool.some((w) => w.ready)) startBroken = error;
      }
      died = true;
      markStarted();
      const index = pool.indexOf(entry);
      if (index >= 0) pool.splice(index, 1);
      releaseLease(entry);
      for (const [id, task] of pending) {
        if (task.owner === entry) {
          pending.delete(id);
          task.reject(Object.assign(new Error(`decode thread died: ${error.message}`), { code: 'WORKER_FAILED' }));
        }
      }
      wakeReadyWaiters();
      // Queued reads wait for a worker; with none left they fail (the next call starts new ones).
      if (pool.length === 0) {
        for (const queued of readQueue.splice(0)) queued.reject(Object.assign(new Error(`decode thread died: ${error.message}`), { code: 'WORKER_FAILED' }));
      }
      // Slots taken for reads that are gone now go back.
      releaseIdle();
    };
    entry.worker.on('error', die);
    entry.worker.on('exit', (code) => die(new Error(`exit code ${code}`)));
    // After the listeners: adding a 'message' listener refs the worker's port again.
    entry.worker.unref();
    return entry;
  };

  const idOfArena = (arena: CodecArena): number => {
    let id = arenaIds.get(arena);
    if (id === undefined) {
      id = nextArenaId++;
      arenaIds.set(arena, id);
      forget.register(arena, id);
    }
    return id;
  };

  /**
   * Set once a worker died before it took a job while none was ready (a worker script that is
   * missing or throws as it loads): no worker is started again, and the calling thread decodes
   * every tensor (the name says so). Before 2026-12-07 every tensor for the workers was served raw.
   */
  let startBroken: Error | undefined;
  const startWorkers = (): void => {
    if (startBroken !== undefined) return;
    while (pool.length < threads) pool.push(spawn());
  };

  const pickWorker = (): PoolWorker => {
    startWorkers();
    // Ready workers first: a job sent to one still starting would wait for its module to load.
    const ready = pool.filter((w) => w.ready);
    const candidates = ready.length > 0 ? ready : pool;
    return candidates.reduce((best, w) => (w.busy < best.busy ? w : best), candidates[0] as PoolWorker);
  };

  /** `source`: a read-decode job's staging source (see pending). */
  const dispatch = (job: Omit<DecodeThreadJob, 'id'>, arena: CodecArena | undefined, to?: PoolWorker, source?: object): Promise<JobDone> => {
    const owner = to ?? pickWorker();
    if (arena !== undefined) {
      const arenaId = idOfArena(arena);
      // Staging arenas outlive a load (idle pools): another decoder's worker may have taken this
      // slot's share since, retiring this worker's attachment; shareFor says when to attach again.
      const share = arena.shareFor(owner.slot, owner);
      if (share !== null) {
        owner.attached.add(arenaId);
        owner.worker.postMessage({ kind: 'attach', arenaId, share } satisfies DecodeThreadMessage);
      }
    }
    const id = nextId++;
    jobs += 1;
    return new Promise<JobDone>((resolve, reject) => {
      pending.set(id, { resolve, reject, owner, ...(source === undefined ? {} : { source }) });
      // Referenced while busy, so the process waits for the answer; idle workers never hold it open.
      if (owner.busy++ === 0) owner.worker.ref();
      try {
        owner.worker.postMessage({ ...job, id } satisfies DecodeThreadJob);
      } catch (error) {
        // Not sent (a value that cannot be cloned): nothing will answer it, so it must not stay
        // pending, or keep the worker referenced (and the process alive).
        pending.delete(id);
        jobs -= 1;
        owner.busy -= 1;
        releaseIdle();
        reject(error);
      }
    });
  };

  /** The smallest kept buffer of `bytes` to `maxBytes`, else a new one of `bytes`. */
  const takeScratch = (bytes: number, maxBytes = Number.POSITIVE_INFINITY): SharedArrayBuffer => {
    let index = -1;
    for (let k = 0; k < scratch.length; k += 1) {
      const size = (scratch[k] as SharedArrayBuffer).byteLength;
      if (size >= bytes && size <= maxBytes && (index < 0 || size < (scratch[index] as SharedArrayBuffer).byteLength)) index = k;
    }
    if (index >= 0) return scratch.splice(index, 1)[0] as SharedArrayBuffer;
    scratchAllocations += 1;
    return new SharedArrayBuffer(Math.max(256, bytes));
  };

  /** The arena a view can be reached through by every worker, or a plain shared buffer, or nothing. */
  const place = (view: ArrayBufferView, arena: CodecArena | undefined): Placement => {
    if (arena !== undefined && view.buffer === arena.buffer) return { ref: { arenaId: idOfArena(arena) }, offset: view.byteOffset };
    if (view.buffer instanceof SharedArrayBuffer) return { ref: { buffer: view.buffer }, offset: view.byteOffset };
    return undefined;
  };

  /**
   * Where `byteLength` bytes of `view` are for the workers: in place when they can reach it, else
   * in a scratch buffer taken for it (the caller gives it back), filled from `view` when `copyIn`.
   */
  const placeOrScratch = (view: ArrayBufferView, byteLength: number, arena: CodecArena | undefined, copyIn: boolean): { at: { ref: SharedRef; offset: number }; scratch: SharedArrayBuffer | undefined } => {
    const at = place(view, arena);
    if (at !== undefined) return { at, scratch: undefined };
    const scratch = takeScratch(byteLength);
    if (copyIn) new Uint8Array(scratch, 0, byteLength).set(new Uint8Array(view.buffer, view.byteOffset, byteLength));
    return { at: { ref: { buffer: scratch }, offset: 0 }, scratch };
  };

  /**
   * See hashContentKey. One worker takes the whole tensor (SHA-1 is one chain): in place from
   * shared memory, else piece by piece through shared scratch, at most two pieces in flight.
   */
  const hashOnThread = async (bytes: Uint8Array, prefix: string): Promise<HashedContentKey> => {
    threadHashes += 1;
    const owner = pickWorker();
    const stream = nextStream++;
    const at = place(bytes, undefined);
    if (at !== undefined) {
      const done = await dispatch({ kind: 'hash', hash: { stream, prefix, last: true }, payload: at.ref, payloadOffset: at.offset, payloadLength: bytes.byteLength }, undefined, owner);
      return { key: done.key as string, busyMs: done.busyMs };
    }
    // Each piece's outcome, settled either way: a piece that fails while an earlier one is awaited
    // must not be an unhandled rejection, and no scratch goes back while its worker may still read it.
    const inFlight: { outcome: Promise<{ done?: JobDone; error?: unknown }>; buffer: SharedArrayBuffer }[] = [];
    let busyMs = 0;
    let key: string | undefined;
    let failure: { error: unknown } | undefined;
    const settleOldest = async () => {
      const piece = inFlight.shift() as (typeof inFlight)[number];
      const { done, error } = await piece.outcome;
      scratch.push(piece.buffer);
      if (done === undefined) failure ??= { error };
      else {
        busyMs += done.busyMs;
        key = done.key ?? key;
      }
    };
    try {
      for (let from = 0; from < bytes.byteLength && failure === undefined; from += HASH_PIECE_BYTES) {
        if (inFlight.length >= 2) await settleOldest();
        if (failure !== undefined) break;
        // The worker died (or the decoder closed) since the last piece: a piece posted to it now
        // would never be answered.
        if (!pool.includes(owner)) {
          failure = { error: Object.assign(new Error('decode thread died while it hashed a tensor'), { code: 'WORKER_FAILED' }) };
          break;
        }
        const length = Math.min(HASH_PIECE_BYTES, bytes.byteLength - from);
        // Piece-sized buffers only, the last piece's too: a piece never takes a decode's
        // tensor-sized buffer (the next decode would allocate it again, and the pool keeps both).
        const buffer = takeScratch(HASH_PIECE_BYTES, HASH_PIECE_BYTES);
        new Uint8Array(buffer, 0, length).set(bytes.subarray(from, from + length));
        const job = { kind: 'hash', hash: { stream, prefix: from === 0 ? prefix : undefined, last: from + length === bytes.byteLength }, payload: { buffer }, payloadOffset: 0, payloadLength: length } as const;
        inFlight.push({ outcome: dispatch(job, undefined, owner).then((done) => ({ done }), (error: unknown) => ({ error })), buffer });
      }
    } catch (error) {
      // A scratch buffer that could not be allocated: the pieces already sent are waited for all the same.
      failure ??= { error };
    }
    while (inFlight.length > 0) await settleOldest();
    // Given up before the last piece: the worker drops the tensor's hash state (it keeps one a stream).
    if (failure !== undefined && pool.includes(owner)) {
      const discard = { kind: 'hash', hash: { stream, last: true, discard: true }, payload: { buffer: NO_BYTES }, payloadOffset: 0, payloadLength: 0 } as const;
      await dispatch(discard, undefined, owner).catch(() => undefined);
    }
    if (failure !== undefined) throw failure.error;
    return { key: key as string, busyMs };
  };

  const checksumFailure = (error: Error & { code?: string }) =>
    new RuntimeError('CACHE_READ_FAILED', `payload checksum: ${error.message}`, { codecCode: error.code }, { cause: error });

  /** The arena `candidate` if the workers can use it in place (a scratch area for each of them). */
  const usableArena = (candidate: CodecArena | undefined): CodecArena | undefined =>
    candidate !== undefined && candidate.threads >= threads && candidate.buffer instanceof SharedArrayBuffer ? candidate : undefined;

  /**
   * See DecodeBackend.readDecode. The worker reads the blob and decodes it at once, while the
   * payload is still in the CPU's caches, and each worker does so for its own tensors: a local
   * cache's reads no longer all wait on the loading thread, and no payload goes to memory and back
   * between its read and its decode.
   */
  const readDecode = (request: ReadDecodeRequest): Promise<ReadDecodeResult> | undefined => {
    if (closed) throw new RuntimeError('INVALID_ARGUMENT', 'thread decoder is closed');
    const { values } = request;
    // Small tensors, and those that arrive while the workers start, are the calling thread's (see decode).
    if (values < inlineMaxValues) return undefined;
    startWorkers();
    if ((values < startupInlineMaxValues || startBroken !== undefined) && !pool.some((w) => w.ready)) return undefined;
    const { signal } = request;
    if (signal?.aborted) return Promise.reject(abortedError('read aborted before it was queued', signal));
    return new Promise<ReadDecodeResult>((resolve, reject) => {
      const queued: QueuedRead = { request, resolve, reject, queuedAt: performance.now() };
      if (signal !== undefined) {
        // Aborted while waiting (for a worker, or for a slot that may never come back): out of the queue.
        const onAbort = () => {
          const index = readQueue.indexOf(queued);
          if (index < 0) return;
          readQueue.splice(index, 1);
          reject(abortedError('read aborted while it waited for a decode thread', signal));
          pumpReads();
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const settle = () => signal.removeEventListener('abort', onAbort);
        queued.resolve = (result) => {
          settle();
          resolve(result);
        };
        queued.reject = (error) => {
          settle();
          reject(error);
        };
      }
      readQueue.push(queued);
      // Waiting jobs keep the process alive, as running ones do (idle workers are unreferenced).
      for (const w of pool) w.worker.ref();
      pumpReads();
    });
  };

  /** Gives a worker's staging slot back to its pool (the worker has no read job left). */
  const releaseLease = (worker: PoolWorker): void => {
    const lease = worker.lease;
    worker.lease = undefined;
    lease?.slot.release();
  };

  /** Whether a read of `source` is queued. */
  const hasQueuedRead = (source: object): boolean => readQueue.some((queued) => queued.request.staging.source === source);

  /** Workers with nothing to do let go of their slots and of the process (queued reads hold both). */
  const releaseIdle = (): void => {
    for (const w of pool) {
      if (w.busy > 0) continue;
      if (w.lease !== undefined && !hasQueuedRead(w.lease.source)) releaseLease(w);
      if (readQueue.length === 0) w.worker.unref();
    }
    // Waits for a slot whose reads went away end: the waiter left in the pool's queue took the
    // next slot its caller released (until 2026-12-07), only to give it back.
    for (const [source, taker] of slotTakers) {
      if (closed || !hasQueuedRead(source)) taker.abort();
    }
    // Slots taken for reads that went away (aborted, or failed) go back.
    for (let k = spareSlots.length - 1; k >= 0; k--) {
      const spare = spareSlots[k] as { source: object; slot: StagingLease };
      if (closed || !hasQueuedRead(spare.source)) {
        spareSlots.splice(k, 1);
        spare.slot.release();
      }
    }
  };

  const pumpReads = (): void => {
    pumpQueued();
    releaseIdle();
  };

  /**
   * Takes a staging slot of `staging`'s source, for whichever worker is idle once it comes (a
   * spare until then). No worker waits for it: a pool with no free slot (its caller holds them all)
   * delayed every other load of the process while the workers each waited on one (until
   * 2026-12-07), where now only the reads of that pool wait.
   */
  const takeSlot = (staging: ReadDecodeStaging): void => {
    const { source } = staging;
    const startedAt = performance.now();
    // A take while a worker of this decoder holds one of the pool's slots only adds a slot: as long
    // as that worker serves the pool's queued reads (each read it finishes moves slotWaitSince on),
    // this take's timeout fails none of them (until 2026-12-07 it failed every read queued
    // slotWaitMs, the served ones too); one that serves none (a hung read) does not stop the clock.
    if (!slotWaitSince.has(source)) slotWaitSince.set(source, startedAt);
    const since = slotWaitSince.get(source) as number;
    // The oldest queued read of the source's deadline clock, from which this take's wait is cut.
    const oldestQueuedAt = readQueue.find((queued) => queued.request.staging.source === source)?.queuedAt ?? startedAt;
    const forFrom = Math.max(oldestQueuedAt, since);
    const knownWaitMs = slotWaitOf.get(source);
    const waitMs = knownWaitMs === undefined ? undefined : Math.max(1, Math.ceil(knownWaitMs - (startedAt - forFrom)));
    const settle = (slot: StagingLease | undefined, error?: unknown) => {
      if (slot !== undefined) {
        slotWaitSince.delete(source);
        if (closed || !hasQueuedRead(source)) slot.release();
        else spareSlots.push({ source, slot });
        return;
      }
      const timedOut = isRuntimeError(error) && error.code === 'POOL_WAIT_TIMEOUT';
      if (!timedOut) {
        // No slot for this source (its pool closed, a load aborted): its waiting reads fail.
        for (let k = readQueue.length - 1; k >= 0; k--) {
          const queued = readQueue[k] as QueuedRead;
          if (queued.request.staging.source !== source) continue;
          readQueue.splice(k, 1);
          queued.reject(error);
        }
        return;
      }
      let fullWaitMs = knownWaitMs;
      if (fullWaitMs === undefined) {
        const told = error.details.slotWaitMs;
        fullWaitMs = typeof told === 'number' ? told : performance.now() - startedAt;
        slotWaitOf.set(source, fullWaitMs);
      }
      const nowSince = slotWaitSince.get(source);
      if (nowSince === undefined) return;
      // A read fails once it has waited slotWaitMs counted from the later of its enqueue and when
      // the threads' wait for one of the pool's slots began, or last saw progress (slotWaitSince:
      // a worker of this decoder that serves the pool's reads keeps moving it on); the rest keep
      // their place and a fresh take waits what the oldest has left.
      const now = performance.now();
      for (let k = readQueue.length - 1; k >= 0; k--) {
        const queued = readQueue[k] as QueuedRead;
        if (queued.request.staging.source !== source) continue;
        const from = Math.max(queued.queuedAt, nowSince);
        const waitedMs = now - from;
        if (from > forFrom && waitedMs < fullWaitMs - TIMER_SLACK_MS) continue;
        readQueue.splice(k, 1);
        queued.reject(readWaitTimeoutError(error, fullWaitMs, waitedMs));
      }
    };
    /** The threads' wait for a slot of the source ends when no take of it is left (or one came). */
    const endSlotWait = () => {
      if (!slotsTaking.has(source)) slotWaitSince.delete(source);
    };
    const taker = new AbortController();
    let taken: StagingLease | Promise<StagingLease>;
    try {
      taken = staging.take(taker.signal, waitMs);
    } catch (error) {
      settle(undefined, error);
      endSlotWait();
      return;
    }
    if (!(taken instanceof Promise)) {
      settle(taken);
      endSlotWait();
      return;
    }
    slotsTaking.set(source, (slotsTaking.get(source) ?? 0) + 1);
    slotTakers.set(source, taker);
    const done = (slot: StagingLease | undefined, error?: unknown) => {
      const left = (slotsTaking.get(source) ?? 1) - 1;
      if (left > 0) slotsTaking.set(source, left);
      else slotsTaking.delete(source);
      if (slotTakers.get(source) === taker) slotTakers.delete(source);
      // Given up here (no read needed it): a read queued since takes a slot anew, not this failure.
      if (slot !== undefined || !taker.signal.aborted) settle(slot, error);
      pumpReads();
      endSlotWait();
    };
    taken.then((slot) => done(slot), (error: unknown) => done(undefined, error));
  };

  /** A spare slot of `source` (taken earlier, no worker holds it), removed from the spares. */
  const takeSpare = (source: object): StagingLease | undefined => {
    const index = spareSlots.findIndex((spare) => spare.source === source);
    return index < 0 ? undefined : (spareSlots.splice(index, 1)[0] as { slot: StagingLease }).slot;
  };

  /**
   * The worker a read of `staging`'s source goes to now, holding a slot of that source, or none
   * (the read waits). An idle worker holding none takes one (a spare, else one taken now) before a
   * read queues behind a busy worker.
   */
  const workerFor = (staging: ReadDecodeStaging): PoolWorker | undefined => {
    const { source } = staging;
    let holder: PoolWorker | undefined;
    for (const w of pool) {
      if (w.ready && w.lease?.source === source && w.busy < readJobsPerWorker && (holder === undefined || w.busy < holder.busy)) holder = w;
    }
    if (holder !== undefined && holder.busy === 0) return holder;
    let idle: PoolWorker | undefined;
    for (const w of pool) {
      if (!w.ready || w.busy > 0 || w.lease?.source === source) continue;
      // One holding no slot first: another's slot stays for its source's next read.
      if (idle === undefined || (idle.lease !== undefined && w.lease === undefined)) idle = w;
    }
    if (idle === undefined) return holder;
    let slot = takeSpare(source);
    if (slot === undefined && !slotsTaking.has(source)) {
      takeSlot(staging);
      slot = takeSpare(source);
    }
    if (slot === undefined) return holder;
    releaseLease(idle);
    idle.lease = { source, slot };
    return idle;
  };

  /**
   * Hands queued reads to workers in order. Each worker reads into one staging slot of its own,
   * kept across its jobs (so the slot a read goes to is the one its previous decode just left in
   * the CPU's caches), and gets its next job while it still runs the current one (READ_JOBS_PER_WORKER),
   * so it never sleeps between jobs waiting for this thread to answer: one job at a time, a worker
   * waited ~0.4 ms for each message to wake it and ~0.2-0.5 ms for this thread to see each answer,
   * a quarter of its time on the 1.07 GB page-cache load (79 jobs). A read that must wait (for a
   * slot of its source, or a worker) holds back only the later reads of its own source.
   */
  const pumpQueued = (): void => {
    let waiting: object[] | undefined;
    for (let k = 0; k < readQueue.length && !closed; ) {
      const queued = readQueue[k] as QueuedRead;
      const { staging } = queued.request;
      if (waiting?.includes(staging.source) === true) {
        k += 1;
        continue;
      }
      const worker = workerFor(staging);
      // The queue may have changed (a slot that could not be taken failed its source's reads).
      if (readQueue[k] !== queued) continue;
      if (worker === undefined) {
        // Only a read waiting for a slot of its own pool lets later reads pass. One waiting for an
        // idle worker holds back the rest: later reads of a busy pool, handed to its busy workers,
        // kept every worker busy, and this read waited as long as they came (2026-12-07).
        const waitsForSlot = slotsTaking.has(staging.source) && !spareSlots.some((spare) => spare.source === staging.source);
        if (!waitsForSlot && !pool.some((w) => w.ready && w.busy === 0)) return;
        (waiting ??= []).push(staging.source);
        k += 1;
        continue;
      }
      readQueue.splice(k, 1);
      const lease = (worker.lease as { slot: StagingLease }).slot;
      let opened: OpenedPayloadFile;
      try {
        opened = queued.request.open(lease);
      } catch (error) {
        queued.reject(error);
        continue;
      }
      runReadDecode(opened, queued.request.values, worker).then(queued.resolve, queued.reject);
    }
  };

  /**
   * See DecodeBackend.decodeToNew: one worker decodes the whole payload (checksum fused when
   * verified) into a buffer it allocates, and hands it over. Not split across workers: their
   * parts would have to share one buffer, which only shared memory allows.
   */
  const decodeToNewBuffer = async (payload: Uint8Array, meta: PayloadMeta, verify: boolean, candidate: CodecArena | undefined): Promise<DecodedBuffer> => {
    const arena = usableArena(candidate);
    const { at: payloadAt, scratch: payloadScratch } = placeOrScratch(payload, meta.compBytes, arena, true);
    if (payloadAt.ref.arenaId !== undefined) arenaDecodes += 1;
    try {
      let done: JobDone;
      try {
        done = await dispatch(
          {
            kind: verify ? 'decode-verify' : 'decode',
            payload: payloadAt.ref,
            payloadOffset: payloadAt.offset,
            payloadLength: meta.compBytes,
            firstChunk: 0,
            chunkCount: meta.chunkCount,
          },
          payloadAt.ref.arenaId !== undefined ? arena : undefined,
        );
      } catch (error) {
        if (startBroken !== undefined && (error as { code?: string }).code === 'WORKER_FAILED') {
          // Sent to workers that then failed to start: the calling thread decodes it, as it does the next ones.
          inlineDecodes += 1;
          const values = new Uint16Array(meta.elementCount);
          try {
            return { values, busyMs: await decodeInline(payload.subarray(0, meta.compBytes), meta, values, verify) };
          } catch (inlineError) {
            throw (inlineError as { code?: string }).code === 'CHECKSUM_MISMATCH' ? checksumFailure(inlineError as Error) : inlineError;
          }
        }
        throw (error as { code?: string }).code === 'CHECKSUM_MISMATCH' ? checksumFailure(error as Error) : error;
      }
      if (done.values === undefined || done.values.byteLength !== 2 * meta.elementCount) {
        throw new RuntimeError('DECODE_FAILED', 'decode thread returned no values buffer of the tensor size', { values: meta.elementCount });
      }
      return { values: new Uint16Array(done.values), busyMs: done.busyMs };
    } finally {
      if (payloadScratch !== undefined) scratch.push(payloadScratch);
    }
  };

  /** Posts a read-decode job to `worker` at once (its busy count rises before this returns). */
  const runReadDecode = async (opened: OpenedPayloadFile, values: number, worker: PoolWorker): Promise<ReadDecodeResult> => {
    const { fd, payload, out } = opened;
    if (out !== undefined && out.length !== values) throw new RuntimeError('INVALID_ARGUMENT', `out holds ${out.length} values, the tensor ${values}`, { values });
    const arena = usableArena(opened.arena);
    // Memory the workers cannot reach goes through shared scratch (the values copied out here).
    const { at: payloadAt, scratch: payloadScratch } = placeOrScratch(payload, payload.length, arena, false);
    // No `out`: the worker allocates the values' buffer itself and hands it over (no copy here).
    const outHome = out === undefined ? undefined : placeOrScratch(out, 2 * values, arena, false);
    const outAt = outHome?.at;
    const outScratch = outHome?.scratch;
    if (payloadAt.ref.arenaId !== undefined) arenaDecodes += 1;
    threadReads += 1;
    const jobArena = payloadAt.ref.arenaId !== undefined || outAt?.ref.arenaId !== undefined ? arena : undefined;
    try {
      let done: JobDone;
      try {
        done = await dispatch(
          {
            kind: 'read-decode-verify',
            fd,
            payload: payloadAt.ref,
            payloadOffset: payloadAt.offset,
            payloadLength: payload.length,
            out: outAt?.ref,
            outOffset: outAt?.offset,
            outValues: values,
            check: opened.check,
          },
          jobArena,
          worker,
          worker.lease?.source,
        );
      } catch (error) {
        throw (error as { code?: string }).code === 'CHECKSUM_MISMATCH' ? checksumFailure(error as Error) : error;
      }
      const copyStartMs = performance.now();
      if (outScratch !== undefined) out?.set(new Uint16Array(outScratch, 0, values));
      let allocated: Uint16Array | undefined;
      if (out === undefined) {
        if (done.values === undefined || done.values.byteLength !== 2 * values) {
          throw new RuntimeError('DECODE_FAILED', 'decode thread returned no values buffer of the tensor size', { values });
        }
        allocated = new Uint16Array(done.values);
      }
      return { readMs: done.readMs ?? 0, decodeMs: done.busyMs + performance.now() - copyStartMs, ...(allocated ? { values: allocated } : {}) };
    } finally {
      if (payloadScratch !== undefined) scratch.push(payloadScratch);
      if (outScratch !== undefined) scratch.push(outScratch);
    }
  };

  return markSettlingBackend({
    shared: true,
    verifiesChecksum: true,
    threads,
    inlineMaxValues,
    // The payloads decoded inline below (the loading thread's codec pass) may also be streamed.
    streamMaxValues: inlineMaxValues,
    get name() {
      if (startBroken === undefined) return `threads:${threads}`;
      return `threads:${threads} (decode threads failed to start, the calling thread decodes: ${startBroken.message.slice(0, MAX_START_FAILURE_CHARS)})`;
    },
    get closed() {
      return closed;
    },
    stats: () => ({ jobs, scratchAllocations, arenaDecodes, inlineDecodes, callerShares, threadReads, threadHashes, startedThreads: pool.length, readyThreads: pool.filter((w) => w.ready).length }),
    async warmUp() {
      if (closed) throw new RuntimeError('INVALID_ARGUMENT', 'thread decoder is closed');
      const failuresBefore = startFailures;
      for (;;) {
        if (startBroken !== undefined) throw new RuntimeError('DECODE_FAILED', `a decode thread failed to start: ${startBroken.message}`, { threads });
        startWorkers();
        if (pool.every((w) => w.ready)) return;
        // Starting workers are unreferenced: with nothing else alive (a script's top-level await)
        // the process would exit before they answer. Each lets go once ready (pumpReads).
        for (const w of pool) if (!w.ready) w.worker.ref();
        await new Promise<void>((wake) => readyWaiters.push(wake));
        if (closed) throw new RuntimeError('INVALID_ARGUMENT', 'thread decoder is closed');
        if (startFailures > failuresBefore) {
          throw new RuntimeError('DECODE_FAILED', `a decode thread failed to start: ${lastStartError?.message ?? 'unknown error'}`, { threads });
        }
      }
    },
    async decode(payload, meta, out, decodeOptions) {
      if (closed) throw new RuntimeError('INVALID_ARGUMENT', 'thread decoder is closed');
      const verify = decodeOptions?.verifyChecksum === true;
      // Workers start with the first tensor large enough to use them (a model of small tensors never
      // pays for their start-up).
      if (meta.elementCount >= inlineMaxValues) startWorkers();
      const readyThreads = pool.filter((w) => w.ready).length;
      if (meta.elementCount < inlineMaxValues || (readyThreads === 0 && (meta.elementCount < startupInlineMaxValues || startBroken !== undefined))) {
        // Small, or the workers are still starting: here, in one pass (checksum and decode fused
        // where the codec can).
        inlineDecodes += 1;
        try {
          return await decodeInline(payload.subarray(0, meta.compBytes), meta, out.subarray(0, meta.elementCount), verify);
        } catch (error) {
          if ((error as { code?: string }).code === 'CHECKSUM_MISMATCH') throw checksumFailure(error as Error);
          throw error;
        }
      }
      // An arena works for the workers only with a scratch area for each of them.
      const arena = usableArena(decodeOptions?.arena);
      const { at: payloadAt, scratch: payloadScratch } = placeOrScratch(payload, meta.compBytes, arena, true);
      const { at: outAt, scratch: outScratch } = placeOrScratch(out, 2 * meta.elementCount, arena, false);
      if (payloadAt.ref.arenaId !== undefined) arenaDecodes += 1;
      const jobArena = payloadAt.ref.arenaId !== undefined || outAt.ref.arenaId !== undefined ? arena : undefined;
      try {
        const base = { payload: payloadAt.ref, payloadOffset: payloadAt.offset, payloadLength: meta.compBytes, out: outAt.ref };
        const tasks: Promise<JobDone>[] = [];
        // Split a large tensor only when the workers are idle (a whole-model load keeps them busy with
        // whole tensors already), over the ready ones (a part sent to one still starting would wait).
        const idle = pool.every((w) => w.busy === 0);
        const split = idle && readyThreads > 1 && meta.elementCount >= splitMinValues && meta.chunkCount > 1;
        // The calling thread decodes the last segments of a verified v3 tensor itself while the
        // workers decode the rest: with one decode thread (2 cores) a tensor's decode was otherwise
        // never split, and the last large tensor of a load decoded on one core while the loading
        // thread, its reads done, waited. Only when the workers are idle: with decode the limit
        // (the 1.07 GB model from the page cache) the cores are all busy, and the calling thread's
        // share delayed the reads that feed them (cache load 176-199 ms against 149-181 without).
        const shareable = idle && verify && meta.version >= 3 && callerShareMaxValues >= SEGMENT_VALUES && meta.elementCount > SEGMENT_VALUES;
        const segmentCount = (split && verify && meta.version >= 3) || shareable ? countPayloadSegments(payload.subarray(0, meta.compBytes), meta) : 0;
        let segmentRanges: [number, number][] | undefined;
        let callerRange: [number, number] | undefined;
        if (segmentCount > 1) {
          // Format v3: each thread decodes and hashes its own segments in one pass; the digests
          // are combined and checked here before the values are handed out.
          const workers = split ? readyThreads : 1;
          let workerSegments = segmentCount;
          if (shareable) {
            // An even share, but never more than callerShareMaxValues: it holds the event loop.
            const callerSegments = Math.min(Math.floor(callerShareMaxValues / SEGMENT_VALUES), Math.max(1, Math.floor(segmentCount / (workers + 1))));
            workerSegments = segmentCount - callerSegments;
            callerRange = [workerSegments, segmentCount];
          }
          segmentRanges = splitEvenly(workerSegments, workers);
          for (const [firstSegment, endSegment] of segmentRanges) {
            const outOffset = outAt.offset + 2 * firstSegment * SEGMENT_VALUES;
            tasks.push(dispatch({ ...base, kind: 'decode-segments', outOffset, firstSegment, endSegment }, jobArena));
          }
        } else if (split && !verify) {
          for (const [firstChunk, endChunk] of splitEvenly(meta.chunkCount, readyThreads)) {
            const outOffset = outAt.offset + 2 * firstChunk * meta.chunkSize;
            tasks.push(dispatch({ ...base, kind: 'decode', outOffset, firstChunk, chunkCount: endChunk - firstChunk }, jobArena));
          }
        } else {
          // One thread, one fused pass (a v2 payload's checksum is one serial hash: splitting it
          // would leave one thread hashing the whole payload while the others wait).
          const kind = verify ? 'decode-verify' : 'decode';
          tasks.push(dispatch({ ...base, kind, outOffset: outAt.offset, firstChunk: 0, chunkCount: meta.chunkCount }, jobArena));
        }
        // A corrupt payload is a cache-read failure (the blob), not a decode failure.
        const decoded = tasks.map((task) =>
          task.catch((error: Error & { code?: string }) => {
            throw error.code === 'CHECKSUM_MISMATCH' ? checksumFailure(error) : error;
          }),
        );
        let callerDigests: Uint32Array | undefined;
        let callerFailure: unknown;
        let callerMs = 0;
        if (callerRange !== undefined) {
          // While the workers run: the values go where theirs go (the output, or its scratch).
          callerShares += 1;
          const [firstSegment, endSegment] = callerRange;
          const first = firstSegment * SEGMENT_VALUES;
          const target = outScratch !== undefined ? new Uint16Array(outScratch, 2 * first, meta.elementCount - first) : out.subarray(first, meta.elementCount);
          callerDigests = new Uint32Array(SEGMENT_DIGESTS * (endSegment - firstSegment));
          const callerStartMs = performance.now();
          try {
            decodeSegments(payload.subarray(0, meta.compBytes), meta, firstSegment, endSegment, target, { digests: callerDigests });
          } catch (error) {
            // Reported once the workers are done with this payload and output.
            callerFailure = error;
          }
          callerMs = performance.now() - callerStartMs;
        }
        const settled = await Promise.allSettled(decoded);
        const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
        if (failed !== undefined && startBroken !== undefined && (failed.reason as { code?: string }).code === 'WORKER_FAILED') {
          // Sent to workers that then failed to start: the calling thread decodes it, as it does the next ones.
          inlineDecodes += 1;
          return await decodeInline(payload.subarray(0, meta.compBytes), meta, out.subarray(0, meta.elementCount), verify).catch((error: Error & { code?: string }) => {
            throw error.code === 'CHECKSUM_MISMATCH' ? checksumFailure(error) : error;
          });
        }
        if (failed) throw failed.reason;
        if (callerFailure !== undefined) {
          throw (callerFailure as { code?: string }).code === 'CHECKSUM_MISMATCH' ? checksumFailure(callerFailure as Error) : callerFailure;
        }
        const copyStartMs = performance.now();
        if (segmentRanges !== undefined) {
          const digests = new Uint32Array(SEGMENT_DIGESTS * segmentCount);
          settled.forEach((s, k) => {
            const part = (s as PromiseFulfilledResult<JobDone>).value.digests;
            const range = segmentRanges[k] as [number, number];
            if (part === undefined || part.length !== SEGMENT_DIGESTS * (range[1] - range[0])) {
              throw new RuntimeError('DECODE_FAILED', 'decode thread returned no digests for its segments', { range });
            }
            digests.set(part, SEGMENT_DIGESTS * range[0]);
          });
          if (callerRange !== undefined && callerDigests !== undefined) digests.set(callerDigests, SEGMENT_DIGESTS * callerRange[0]);
          try {
            verifySegmentDigests(payload.subarray(0, meta.compBytes), meta, digests);
          } catch (error) {
            throw checksumFailure(error as Error);
          }
        }
        if (outScratch !== undefined) out.set(new Uint16Array(outScratch, 0, meta.elementCount));
        // CPU time: the workers' jobs (summed over threads) plus the share and the copy-out here.
        let busyMs = callerMs + performance.now() - copyStartMs;
        for (const s of settled) if (s.status === 'fulfilled') busyMs += s.value.busyMs;
        return busyMs;
      } finally {
        if (payloadScratch !== undefined) scratch.push(payloadScratch);
        if (outScratch !== undefined) scratch.push(outScratch);
      }
    },
    readDecode,
    hashContentKey(bytes, prefix) {
      // Small or empty tensors, those that arrive while the workers start, and any after close: the caller's.
      if (closed || bytes.byteLength === 0 || bytes.byteLength < hashInlineMaxBytes) return undefined;
      // Workers start for a tensor that would start them for its decode (2 × inlineMaxValues bytes,
      // 4 MiB by default), not for smaller ones: a model of small tensors never pays for their start.
      if (bytes.byteLength >= 2 * inlineMaxValues) startWorkers();
      if (!pool.some((w) => w.ready)) return undefined;
      return hashOnThread(bytes, prefix);
    },
    decodeToNew(payload, meta, decodeOptions) {
      if (closed) throw new RuntimeError('INVALID_ARGUMENT', 'thread decoder is closed');
      // As decode: small tensors, and those that arrive while the workers start, are the caller's.
      if (meta.elementCount < inlineMaxValues) return undefined;
      startWorkers();
      if ((meta.elementCount < startupInlineMaxValues || startBroken !== undefined) && !pool.some((w) => w.ready)) return undefined;
      return decodeToNewBuffer(payload, meta, decodeOptions?.verifyChecksum === true, decodeOptions?.arena);
    },
    async close() {
      closed = true;
      for (const queued of readQueue.splice(0)) queued.reject(new RuntimeError('INVALID_ARGUMENT', 'thread decoder is closed'));
      // No slot wait outlives the decoder in its pool's queue.
      for (const taker of slotTakers.values()) taker.abort();
      wakeReadyWaiters();
      const workers = pool.splice(0);
      await Promise.all(
        workers.map(async (entry) => {
          if (!entry.ready) {
            // Workers are unref'd (they never keep a process alive): one that is starting must
            // while close() waits for it, or a process with nothing else to do exits under an
            // unsettled close(). It is terminated right after.
            entry.worker.ref();
            let timer: ReturnType<typeof setTimeout> | undefined;
            await Promise.race([entry.started, new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_STARTUP_WAIT_MS).unref()))]);
            clearTimeout(timer);
          }
          await entry.worker.terminate();
        }),
      );
      // After the workers stopped: no read of theirs is still writing into a slot.
      for (const entry of workers) releaseLease(entry);
      for (const spare of spareSlots.splice(0)) spare.slot.release();
      slotWaitSince.clear();
    },
  });
}

let processThreadDecoder: ThreadDecoder | undefined;

/**
 * The process-wide thread decoder behind `backend: 'threads'`: started on first use, shared by every
 * load (its workers never keep the process alive), never closed.
 */
export function getSharedThreadDecoder(): ThreadDecoder {
  // Marked so that loads never close it; one a caller closed all the same is replaced (loads
  // refuse a closed backend).
  if (processThreadDecoder === undefined || processThreadDecoder.closed) processThreadDecoder = Object.assign(createThreadDecoder(), { processWide: true as const });
  return processThreadDecoder;
}
