import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { MessageChannel, type MessagePort, type Worker } from 'node:worker_threads';
import {
  createCodecArena,
  decode,
  isSplitZipError,
  readPayloadMeta,
  SEGMENT_DIGESTS,
  SplitZipError,
  OUTER_DIGESTS,
  verifyOuterDigests,
  verifyPayloadChecksum,
  verifySegmentDigests,
  type CodecArena,
  type PayloadMeta,
} from '@splitzip/codec';
import { checkOutputApart, checkPayloadArray } from './check-call-arguments.js';
import { checkOutput } from './check-output.js';
import { checkDecodeOptions } from './check-call-options.js';
import { checkBooleanOption, checkIntegerOption, checkOptionKeys, checkOptionsObject, checkSignalOption, describeValue, kernelsArgumentTypeError, optionNames } from './check-options.js';
import { createMetaReader } from './create-meta-reader.js';
import { abortedError } from './aborted-error.js';
import { KernelsError } from './errors.js';
import { findWorkerScriptProblem } from './find-worker-script-problem.js';
import {
  CONTROL_DONE,
  CONTROL_FAILED,
  CONTROL_TASK_DONE,
  claimVerify,
  createControl,
  decodeClaimedTasks,
  isVerifyJudged,
  markFailed,
  runVerify,
  taskUnits,
  taskValues,
  type TaskKind,
} from './decode-claimed-tasks.js';
import type { BufferRef, DecodeJob, DecodeJobReply, WorkerMessage, WorkerStart } from './worker-protocol.js';
import type { DecodeOptions } from './types.js';
import { startWorker } from './start-worker.js';

/** Below this many values one thread beats the hand-off to workers (measured: 2^20 was slower in parallel). */
export const DEFAULT_MIN_PARALLEL_ELEMENTS = 2 ** 22;
/** Cap on the pool: the decode is memory-bound well before this many cores. */
export const MAX_WORKER_THREADS = 32;
/** Claimable ranges per decoding thread: small enough to balance, large enough to amortize. */
const TASKS_PER_THREAD = 8;
/**
 * The caller waits for stragglers blocking (a futex wake-up, far quicker than a message) for this
 * long, then asynchronously, so that a worker that died mid-job is noticed instead of waited on.
 */
const BLOCKING_WAIT_MS = 100;
/**
 * Before it sleeps on the done slot, the caller spins this long: the workers' last ranges usually
 * end within it, and a futex wake-up of a sleeping thread costs ~0.05 ms on the 2-core VM (about a
 * third of one 2^20-value range), paid at the end of every decode. Short, so that a caller sharing
 * a loaded core with the workers gives it back soon.
 */
const SPIN_WAIT_MS = 0.25;
/** Arena ids: the decoder's (caller's) arena, then one per staging arena made. */
const USER_ARENA_ID = 0;
const ARENA_ALIGN_BYTES = 256;
const WORKER_DECODER_OPTIONS = optionNames<WorkerDecoderOptions>({
  threads: true,
  minParallelElements: true,
  workerUrl: true,
  callerDecodes: true,
  splitChecksum: true,
  arena: true,
  arenaBytes: true,
});
const VERIFY_OPTIONS = optionNames<VerifyChecksumOptions>({ gate: true, signal: true });
const WORKER_DECODE_OPTIONS = optionNames<WorkerDecodeOptions>({ verify: true, signal: true });

/** A worker decoder's per-call options: a Kernels decode's (`verify`) and an AbortSignal for this call. */
export interface WorkerDecodeOptions extends DecodeOptions {
  /**
   * Abandons this call alone (no dispose()): when it fires the call rejects `ABORTED` (the signal's
   * reason as `cause` and `details.reason`) as soon as the calling thread's event loop hears it: at
   * once while the call waits for its turn or asynchronously for its workers; after the synchronous
   * part it is in otherwise (its own ranges with callerDecodes, copy-in of an ordinary payload, up to
   * BLOCKING_WAIT_MS of blocking wait). An already-aborted signal rejects before anything starts.
   * The decoder stays usable. Work in flight is told to stop (no thread claims another range or
   * starts a whole-payload checksum, a wait on a gate or copy-in gives up) and finishes in the
   * background; the next call starts once it has (see `idle()`). Such a call borrows no staging
   * from the decoder's arena (stageOrdinary).
   */
  signal?: AbortSignal | undefined;
}

export interface VerifyChecksumOptions {
  /** See WorkerDecoder.verifyChecksum. */
  gate?: Int32Array | undefined;
  /** As WorkerDecodeOptions.signal: a gate never raised no longer holds the call until dispose(). */
  signal?: AbortSignal | undefined;
}

export interface WorkerDecoderOptions {
  /**
   * Worker threads in the pool; the calling thread decodes too, so a 2-core machine wants 1.
   * Default: available cores - 1, at least 1, at most MAX_WORKER_THREADS.
   */
  threads?: number | undefined;
  /** Tensors smaller than this decode on the calling thread (default DEFAULT_MIN_PARALLEL_ELEMENTS). */
  minParallelElements?: number | undefined;
  /**
   * The worker script (default: decode-worker.js next to this module in dist/). In a bundle that
   * inlined this package: the installed one, `new URL(import.meta.resolve('@splitzip/kernels/decode-worker'))`.
   * What Node's Worker takes: a file: or data: URL object, or a path, absolute or ./ or ../
   * relative (a file: URL as a string is refused: INVALID_ARGUMENT).
   */
  workerUrl?: URL | string | undefined;
  /**
   * Whether the calling thread works too (default true): it checks the checksum, then claims
   * ranges with the workers. False: it only stages and copies, the workers do the rest (the first
   * to wake checks the checksum) — for machines with a core to spare per worker.
   */
  callerDecodes?: boolean | undefined;
  /**
   * Format version 1 and 2 payloads with `verify`: check the checksum on one thread while the
   * others decode (true, the default), or decode on the calling thread alone with the codec's
   * fused decode + checksum, one read of the payload (false). Splitting reads the payload twice:
   * on 2 idle cores it won (1.1-1.9x, RESULTS.md); on the loaded 2-core machine it lost to the
   * fused pass (README). Version-3 payloads need neither: every thread decodes and hashes its own
   * checksum segments in one pass.
   */
  splitChecksum?: boolean | undefined;
  /**
   * A shared codec arena (`createCodecArena(bytes, { threads: k })` with k ≥ `threads`): payloads
   * and outputs that are views of it are decoded in place by every thread, with no copies. The
   * decoder attaches its workers to shares 0..threads-1; attach none of those elsewhere.
   */
  arena?: CodecArena | undefined;
  /** Or: the decoder makes such an arena of this many bytes (`decoder.arena`, `allocatePayload`, `allocateOutput`). */
  arenaBytes?: number | undefined;
}

export interface WorkerDecoder {
  readonly threads: number;
  /**
   * Workers that died (failed to load, threw, exited) since the decoder was made, each once; the
   * next call starts new ones in their place (after deaths before a worker was ready, a call that
   * decodes on the calling thread starts none for 1, 2, 4, … up to 64 calls). With `callerDecodes`
   * (default) the calling thread then decodes alone and every result is still right: this and
   * `lastWorkerFailure` are the only sign of it. A death is counted when its event arrives: a
   * call that finished while its workers were still loading does not wait for them (a first call
   * would pay their start), so the first death at start-up may be counted after that call; once
   * one is seen, a call that starts replacements resolves only once each is ready or dead (at most
   * 2 s per worker), so their deaths are that call's.
   */
  readonly workerDeaths: number;
  /** Why the last worker died (its error's message, or `exit code N`), or null. */
  readonly lastWorkerFailure: string | null;
  /** The shared arena whose views decode in place (from `arena` or `arenaBytes`), or null. */
  readonly arena: CodecArena | null;
  /** `byteLength` bytes in the arena (shared memory) for a payload (read it or copy it in there); `arena.reset()` frees all. */
  allocatePayload(byteLength: number): Uint8Array<SharedArrayBuffer>;
  /** Room for `count` decoded values in the arena (shared memory: a decode into it returns `Uint16Array<SharedArrayBuffer>`). */
  allocateOutput(count: number): Uint16Array<SharedArrayBuffer>;
  /**
   * Decodes across the pool, chunk ranges per thread; calls run one at a time. Fastest with the
   * payload and `out` in the decoder's arena (in place, no copies). Views of other
   * SharedArrayBuffers are decoded where they are (through each thread's kernel scratch). When
   * only one of them is an ordinary array it is copied through a kept staging arena (the payload
   * before, the values back into `out` as each range finishes); when both are, the calling
   * thread decodes alone (the copies would cost as much as the decode). Without `out` the result
   * is a new array over a new SharedArrayBuffer, whatever the size and path (a decode on the
   * calling thread alone included): parallel decodes need shared memory, and one kind of result
   * for every size (an ordinary one below `minParallelElements` and a shared one above it made
   * `postMessage` transfers and `crypto.subtle.digest` fail only on large tensors). For an
   * ordinary array pass one as `out` (`new Uint16Array(n)`): the result is `out` itself.
   * With `verify` (default), format version 3: the work is cut on checksum-segment boundaries
   * and every thread decodes and hashes its segments in one pass (the codec's decodeSegments with
   * digests); the calling thread combines the digests and checks them before resolving. Versions
   * 1 and 2: the calling thread checks the checksum while the workers decode, then joins them
   * (with `splitChecksum: false` it decodes alone with the codec's fused decode + checksum). No
   * result is returned unless the checksum matches (CHECKSUM_MISMATCH otherwise).
   * `signal` (WorkerDecodeOptions) abandons the call: it rejects ABORTED (see there for when). An
   * ordinary `out` (copied back by the calling thread) is never written after that rejection; a
   * shared one (the arena's, any SharedArrayBuffer, which the workers write themselves) may still
   * be, and a shared payload read, by a worker finishing the range it holds, until `idle()`
   * resolves: reuse them (or reset() an arena holding them) only then. Nothing else of the arena is
   * touched: with a signal, an ordinary side is never staged in the decoder's arena.
   */
  decode(payload: Uint8Array, out?: undefined, options?: WorkerDecodeOptions): Promise<Uint16Array<SharedArrayBuffer>>;
  /**
   * Into `out`: the result is `out`, typed with its buffer. Overloads, not a defaulted type
   * parameter: `decode<ArrayBuffer>(payload)` compiled and returned a SharedArrayBuffer's array.
   */
  decode<TBuffer extends ArrayBufferLike>(payload: Uint8Array, out: Uint16Array<TBuffer>, options?: WorkerDecodeOptions): Promise<Uint16Array<TBuffer>>;
  decode<TBuffer extends ArrayBufferLike>(payload: Uint8Array, out: Uint16Array<TBuffer> | undefined, options?: WorkerDecodeOptions): Promise<Uint16Array<TBuffer | SharedArrayBuffer>>;
  /**
   * Checks the payload's checksum on the workers (in place for a view of the decoder's arena,
   * through each worker's kernel scratch for other shared memory), leaving the calling thread
   * free: a format-v3 payload's segment digests on every worker of the pool (segment ranges
   * claimed as they go), combined and compared here; older versions on one worker. Rejects with
   * the codec's CHECKSUM_MISMATCH, or INVALID_ARGUMENT for an ordinary array (only the calling
   * thread can read it). The header must already be valid (readPayloadMeta). `gate` (v3): an
   * Int32Array(1) over shared memory counting the segments the caller has read; each segment is
   * hashed once the gate passed it (see ChecksumOffload); the caller must raise it to the
   * segment count in the end. `signal` abandons the call, as decode's (a gate never raised then
   * no longer holds it until dispose()); the payload may be read by the workers until `idle()`.
   */
  verifyChecksum(payload: Uint8Array, options?: VerifyChecksumOptions): Promise<void>;
  /**
   * Settles once every call made so far is done with the workers, an abandoned (aborted) one's
   * work in flight included: after it no thread of this decoder reads a payload or writes an `out`
   * given to those calls. Never rejects.
   */
  idle(): Promise<void>;
  /**
   * Terminates the workers; idempotent. Calls not yet started, and later ones, reject DISPOSED; a
   * call in flight waiting for its workers is stopped and rejects DISPOSED (`out` may hold part of
   * the values). Resolves once that call settled and the workers are gone. Idle workers are
   * unref'd: a process exits without dispose().
   */
  dispose(): Promise<void>;
}

interface PoolWorker {
  worker: Worker;
  /** The arena share index this worker attaches (unique among live workers). */
  slot: number;
  busy: number;
  doorbell: Int32Array;
  /** 1 once the worker's modules are loaded (WorkerStart.ready). */
  ready: Int32Array;
  /** Settles when the worker's thread has exited (a worker whose script failed to load included). */
  exited: Promise<void>;
  /** A call has waited for this worker's start (awaitStarting): one that hangs is waited for once, not by every call. */
  startAwaited: boolean;
  /** The fillPool call that started it: the backoff steps once per round of starts (onDeath). */
  round: number;
  jobs: MessagePort;
  replies: MessagePort;
  attached: Set<number>;
}

/** Where one buffer of a job lives: for the workers (`ref`, `offset`) and as the caller's view. */
interface Placed<T extends Uint8Array | Uint16Array> {
  ref: BufferRef;
  offset: number;
  view: T;
}

/** A persistent pool of decode workers (Node only: node:worker_threads). Workers start lazily. */
export function createWorkerDecoder(options: WorkerDecoderOptions = {}): WorkerDecoder {
  checkWorkerDecoderOptions(options);
  const threads = options.threads ?? Math.min(MAX_WORKER_THREADS, Math.max(1, availableParallelism() - 1));
  const minParallel = options.minParallelElements ?? DEFAULT_MIN_PARALLEL_ELEMENTS;
  const callerDecodes = options.callerDecodes ?? true;
  const splitChecksum = options.splitChecksum ?? true;
  // A relative path resolved once, here, where it was checked: workers start lazily (the first call,
  // again after deaths), and Worker took it from the working directory then, so a process.chdir
  // after creation made every worker die at start.
  const workerUrl = typeof options.workerUrl === 'string' ? resolve(options.workerUrl) : (options.workerUrl ?? new URL('./decode-worker.js', import.meta.url));
  const userArena = resolveArena(options, threads);
  const arenas = new Map<number, CodecArena>();
  if (userArena !== null) arenas.set(USER_ARENA_ID, userArena);
  const pool: PoolWorker[] = [];
  const pending = new Map<number, { resolve: () => void; reject: (error: Error) => void; worker: PoolWorker }>();
  let nextId = 1;
  let nextArenaId = USER_ARENA_ID + 1;
  // Loaders decode many tensors of a few shapes: the header of the last one is not parsed again.
  const readMeta = createMetaReader();
  let disposed = false;
  // Workers that died (not at dispose): with callerDecodes the calling thread decodes alone and
  // every result is still right, so these are the only sign that the pool does not run.
  let workerDeaths = 0;
  let lastWorkerFailure: string | null = null;
  // Start-up deaths (before the worker reported ready) in a row, and the calls left that start no
  // replacement: a script that cannot load fails the same way every time, and after such a death a
  // call waits for the workers it started to be ready or dead (awaitStarting), ~20 ms more per call
  // for a death on the 2-core VM. Only where the calling thread decodes alone meanwhile (callerDecodes).
  let startDeathsInARow = 0;
  let startHeldCalls = 0;
  // Rounds of starts (fillPool calls that spawned), and the last one whose start-up death stepped the backoff.
  let startRound = 0;
  let steppedRound = 0;
  let markDisposing: () => void = () => undefined;
  const disposing = new Promise<void>((resolve) => (markDisposing = resolve));
  // The job in flight (its shared control): dispose() marks it failed so that threads waiting on a
  // gate or a copy-in that will never come give up, instead of dispose() waiting on it forever.
  let current: { control: Int32Array; taskCount: number } | null = null;
  // Set by dispose(): settles once every worker is terminated; memory a job borrowed from the
  // caller's arena is given back only then (a worker may still write it until it stops).
  let stopped: Promise<void> | null = null;

  const failPending = (worker: PoolWorker, error: Error): void => {
    for (const [id, entry] of pending) {
      if (entry.worker === worker) {
        pending.delete(id);
        entry.reject(error);
      }
    }
  };

  const send = (entry: PoolWorker, message: WorkerMessage): void => {
    entry.jobs.postMessage(message);
    Atomics.add(entry.doorbell, 0, 1);
    Atomics.notify(entry.doorbell, 0);
  };

  /**
   * Counts a worker's death (not one at dispose). One step of the backoff per round of starts,
   * not per worker, whenever the round's deaths arrive (3 threads held 4 calls, then 32, for 1 and 2).
   */
  const countDeath = (reason: string, atStart: boolean, round: number): void => {
    if (disposed) return;
    workerDeaths++;
    lastWorkerFailure = reason;
    if (atStart && round > steppedRound) {
      steppedRound = round;
      startDeathsInARow++;
      startHeldCalls = Math.min(MAX_START_HELD_CALLS, 2 ** (startDeathsInARow - 1));
    }
  };

  /** A new worker, or null when `new Worker` threw (counted as a death at start, as a script that cannot be found). */
  const spawn = (): PoolWorker | null => {
    const slot = [...Array(threads).keys()].find((s) => !pool.some((p) => p.slot === s))!;
    const doorbell = new Int32Array(new SharedArrayBuffer(4));
    const ready = new Int32Array(new SharedArrayBuffer(4));
    const jobChannel = new MessageChannel();
    const replyChannel = new MessageChannel();
    const start: WorkerStart = {
      doorbell: doorbell.buffer as SharedArrayBuffer,
      jobs: jobChannel.port2,
      replies: replyChannel.port2,
      ready: ready.buffer as SharedArrayBuffer,
    };
    let worker: Worker;
    try {
      worker = startWorker(workerUrl, { workerData: start, transferList: [jobChannel.port2, replyChannel.port2] });
    } catch (error) {
      // Refused before any thread ran (a script Node will not take, no thread to be had): it threw
      // out of every parallel decode, an untyped TypeError, even where the calling thread could
      // decode alone. Now it is a death like any other.
      jobChannel.port1.close();
      replyChannel.port1.close();
      countDeath(error instanceof Error ? error.message : String(error), true, startRound);
      return null;
    }
    let markExited: () => void = () => undefined;
    const exited = new Promise<void>((resolve) => (markExited = resolve));
    const entry: PoolWorker = { worker, slot, busy: 0, doorbell, ready, exited, startAwaited: false, round: startRound, jobs: jobChannel.port1, replies: replyChannel.port1, attached: new Set() };
    entry.replies.on('message', (reply: DecodeJobReply) => {
      const task = pending.get(reply.id);
      if (!task) return;
      pending.delete(reply.id);
      if (--entry.busy === 0) {
        worker.unref();
        entry.replies.unref();
      }
      if (reply.ok) task.resolve();
      else task.reject(rebuildError(reply.error));
    });
    // A worker that throws (its script failed to load included) emits 'error' and then 'exit':
    // one death, whose reason is the error's, not "exit code 1" (it counted twice, reason lost).
    let dead = false;
    const onDeath = (reason: string): void => {
      if (dead) return;
      dead = true;
      const index = pool.indexOf(entry);
      if (index >= 0) pool.splice(index, 1);
      countDeath(reason, Atomics.load(ready, 0) === 0, entry.round);
      failPending(entry, new KernelsError('WORKER_FAILED', `decode worker died: ${reason}`, { reason }));
    };
    worker.on('error', (error: Error) => onDeath(error.message));
    worker.on('exit', (code: number) => {
      markExited();
      onDeath(`exit code ${code}`);
    });
    // After the listeners: a 'message' listener starts and refs its port again.
    worker.unref();
    entry.replies.unref();
    return entry;
  };

  /**
   * Starts workers in the place of missing (dead) ones. After a start-up death, calls that can do
   * without them (`optional`: the calling thread decodes) start none for a while: 1 call after the
   * first such death in a row, 2 after the second, doubling up to MAX_START_HELD_CALLS.
   */
  const fillPool = (optional: boolean): void => {
    if (pool.length >= threads) return;
    if (optional && startHeldCalls > 0) {
      startHeldCalls--;
      return;
    }
    startRound++;
    for (let missing = threads - pool.length; missing > 0; missing--) {
      const entry = spawn();
      if (entry !== null) pool.push(entry);
    }
  };

  /** Without a live worker (every start refused), a call that needs one: WORKER_FAILED with the reason. */
  const requireWorker = (): void => {
    if (pool.length > 0) return;
    const reason = lastWorkerFailure ?? 'no worker started';
    throw new KernelsError('WORKER_FAILED', `no decode worker could start: ${reason}`, { reason });
  };

  /**
   * Before a call resolves, after a death at start-up: waits for each worker of the pool still
   * loading to report ready or to die (onDeath counts it), at most WORKER_READY_WAIT_MS, once per
   * worker. The calling thread may have done every range while the workers it started were
   * loading: their deaths are then this call's, not a later call's.
   */
  const awaitStarting = async (): Promise<void> => {
    let starting: PoolWorker[] | undefined;
    let loading = false;
    for (const entry of pool) {
      if (Atomics.load(entry.ready, 0) === 1) startDeathsInARow = 0;
      else {
        loading = true;
        if (!entry.startAwaited) (starting ??= []).push(entry);
      }
    }
    if (disposed) return;
    // Workers still loading that no call waits for: one turn of the loop hears a death delivered.
    if (starting === undefined) {
      if (loading) await hearWorkerEvents();
      return;
    }
    // A pool that has seen no death at start-up does not wait: a healthy first call would pay the
    // rest of its workers' start (12 -> 60 ms for 2^22 values on the 2-core VM) to name a death
    // that almost never comes. One turn of the loop hears a death already delivered; one still to
    // come is counted when it arrives (by the next call's report). Once a start has failed, the
    // calls that start replacements wait for them, so their deaths are theirs.
    if (startDeathsInARow === 0) {
      // Not waited for later either: a later call that starts none would wait for deaths not its own.
      for (const entry of starting) entry.startAwaited = true;
      await hearWorkerEvents();
      return;
    }
    for (const entry of starting) {
      entry.startAwaited = true;
      // Referenced meanwhile: Atomics.waitAsync holds no event loop, and neither does an idle worker.
      entry.worker.ref();
    }
    // An 'error' is counted when it comes; the 'exit' that settles `exited` comes after it.
    await Promise.race([disposing, Promise.all(starting.map((entry) => Promise.race([waitUntilReady(entry.ready, WORKER_READY_WAIT_MS), entry.exited])))]);
    for (const entry of starting) {
      if (entry.busy === 0) entry.worker.unref();
      if (Atomics.load(entry.ready, 0) === 1) startDeathsInARow = 0;
    }
  };

  const postJob = (job: Omit<DecodeJob, 'id'>, entry: PoolWorker): Promise<void> => {
    for (const ref of [job.payload, job.out]) {
      if (!('arena' in ref)) continue;
      // A user's arena may serve another decoder in turn, whose worker took this slot's share
      // since (retiring this worker's attachment): shareFor says when to attach again.
      const share = arenas.get(ref.arena)!.shareFor(entry.slot, entry);
      if (share === null) continue;
      send(entry, { attach: ref.arena, share });
      entry.attached.add(ref.arena);
    }
    const id = nextId++;
    return new Promise<void>((resolve, reject) => {
      pending.set(id, { resolve, reject, worker: entry });
      // Referenced while busy, so the process waits for the answer; idle workers never hold it open.
      if (entry.busy++ === 0) {
        entry.worker.ref();
        entry.replies.ref();
      }
      send(entry, { ...job, id });
    });
  };

  // Staging for ordinary (non-shared) arrays: a shared arena kept across calls (a fresh buffer per
  // call costs a page fault per 4 KiB, more than the decode on large tensors), replaced by a
  // larger one when a tensor does not fit.
  let stage: { id: number; arena: CodecArena } | null = null;

  const stagingArena = (bytes: number): { id: number; arena: CodecArena } | null => {
    if (stage !== null && stage.arena.byteLength >= bytes) {
      stage.arena.reset();
      return stage;
    }
    if (stage !== null) {
      const old = stage.id;
      arenas.delete(old);
      for (const entry of pool) {
        if (entry.attached.delete(old)) send(entry, { detach: old });
      }
      stage = null;
    }
    for (const size of [Math.ceil(bytes * 1.25), bytes]) {
      try {
        stage = { id: nextArenaId++, arena: createCodecArena(size, { threads }) };
        arenas.set(stage.id, stage.arena);
        return stage;
      } catch {
        // Too large for one WebAssembly memory (or not reservable): try the exact size, then none.
      }
    }
    return null;
  };

  const place = <T extends Uint8Array | Uint16Array>(view: T): Placed<T> | null => {
    if (userArena !== null && view.buffer === userArena.buffer) return { ref: { arena: USER_ARENA_ID }, offset: view.byteOffset, view };
    if (view.buffer instanceof SharedArrayBuffer) return { ref: { shared: view.buffer }, offset: view.byteOffset, view };
    return null;
  };

  /**
   * Room for the ordinary side at the top of the decoder's own arena when the other side lives
   * there: a worker's kernels work in one memory, so a payload in one arena and values in another
   * go through scratch copies on every thread (measured at 2^24: slower than one thread). Null
   * when that arena cannot hold it; given back by `release` after the decode.
   */
  const borrowUserArena = (bytes: number): Uint8Array | null => {
    if (userArena === null) return null;
    try {
      return userArena.allocate(bytes);
    } catch {
      return null;
    }
  };

  /**
   * Shared homes for whichever of payload and out are ordinary arrays. A staged payload gets its
   * header and escape sections copied now; `copyIn` copies its codes and sm range by range.
   * `release` gives back room borrowed from the decoder's arena (call it once no thread can
   * touch the job's buffers).
   */
  const stageOrdinary = (
    payload: Uint8Array,
    target: Uint16Array,
    meta: PayloadMeta,
    mayBorrow: boolean,
  ): { payload: Placed<Uint8Array>; out: Placed<Uint16Array>; staged: boolean; copyIn: Uint8Array | null; release: () => void } => {
    const n = meta.elementCount;
    let p = place(payload.subarray(0, meta.compBytes));
    let o = place(target.subarray(0, n));
    if (p !== null && o !== null) return { payload: p, out: o, staged: false, copyIn: null, release: () => undefined };
    const inUserArena = (placed: Placed<Uint8Array | Uint16Array> | null): boolean => placed !== null && 'arena' in placed.ref && placed.ref.arena === USER_ARENA_ID;
    // A call that may be abandoned (it has a signal) borrows nothing from the caller's arena: after
    // its rejection the caller may reset() that arena and allocate again, and a worker finishing its
    // range wrote the staged values into the new allocations (or read a staged payload overwritten).
    // Its side in that arena is staged too, in this decoder's own staging arena: the calling thread
    // copies it in (payload) or back (out, not after the rejection), one more copy, overlapped.
    if (!mayBorrow && inUserArena(p)) p = null;
    if (!mayBorrow && inUserArena(o)) o = null;
    const copyIn = p === null ? payload : null;
    const bytes = (p === null ? alignUp(meta.compBytes) : 0) + (o === null ? 2 * n : 0);
    const borrowed = inUserArena(p) || inUserArena(o) ? borrowUserArena(bytes) : null;
    const home = borrowed === null ? stagingArena(bytes) : null;
    let used = 0;
    const take = (length: number): { ref: BufferRef; buffer: ArrayBufferLike; offset: number } => {
      if (borrowed !== null) {
        const offset = borrowed.byteOffset + used;
        used += alignUp(length);
        return { ref: { arena: USER_ARENA_ID }, buffer: borrowed.buffer, offset };
      }
      if (home !== null) {
        const view = home.arena.allocate(length);
        return { ref: { arena: home.id }, buffer: view.buffer, offset: view.byteOffset };
      }
      // Larger than one WebAssembly memory holds: plain shared memory, decoded through scratch.
      const shared = new SharedArrayBuffer(length);
      return { ref: { shared }, buffer: shared, offset: 0 };
    };
    if (p === null) {
      const t = take(meta.compBytes);
      const view = new Uint8Array(t.buffer, t.offset, meta.compBytes);
      const { codes, escapeIndex } = meta.layout;
      view.set(payload.subarray(0, codes.offsetBytes));
      view.set(payload.subarray(escapeIndex.offsetBytes, meta.compBytes), escapeIndex.offsetBytes);
      p = { ref: t.ref, offset: t.offset, view };
    }
    if (o === null) {
      const t = take(2 * n);
      o = { ref: t.ref, offset: t.offset, view: new Uint16Array(t.buffer, t.offset, n) };
    }
    const release = (): void => {
      if (borrowed !== null) userArena!.release(borrowed);
    };
    return { payload: p, out: o, staged: o.view.buffer !== target.buffer, copyIn, release };
  };

  // One decode at a time: calls share the staging arena and the pool.
  let queue: Promise<unknown> = Promise.resolve();

  const decodeParallel = async (payload: Uint8Array, out: Uint16Array | undefined, verify: boolean, hasSignal: boolean, abandoned: () => boolean): Promise<Uint16Array> => {
    checkPayloadArray(payload);
    const meta = readMeta(payload);
    const n = meta.elementCount;
    // Checked first: isShared(out) below assumes an array (null gave a bare TypeError).
    if (out !== undefined) checkOutput(out, n);
    // Before any worker starts: `out` over the payload's bytes would have threads read what others
    // already overwrote (the escape patcher then ran off on a clobbered index and never returned).
    // (The codec's rule: also two SharedArrayBuffer objects over one memory, as a posted buffer arrives.)
    // The codec's error, as the codec's decode and every Kernels backend throw it (SplitZipError:
    // the codec's array rules are the codec's errors; KernelsError for this package's own).
    if (out !== undefined) checkOutputApart(payload, meta.compBytes, out, n);
    // Both ordinary: the copies in and out of shared memory, which only this thread can make,
    // take as long as decoding here (measured), so the workers cannot win.
    const bothOrdinary = !isShared(payload) && out !== undefined && !isShared(out);
    // Without `out`: shared memory on every path, one kind of result whatever the size (below
    // minParallel it was an ordinary array: a transfer or a digest of the result failed only above).
    const target = out === undefined ? new Uint16Array(new SharedArrayBuffer(2 * n)) : checkOutput(out, n);
    if (n < minParallel || meta.chunkCount < 2 || bothOrdinary) {
      return decode(payload, target, verify ? undefined : { verify: false });
    }
    // Format v3, verified: ranges of whole checksum segments, each decoded and hashed in one pass
    // by whichever thread claims it; this thread combines the digests at the end.
    const kind: TaskKind = verify && meta.version >= 3 ? 'segments' : 'chunks';
    if (verify && kind === 'chunks' && !splitChecksum) return decode(payload, target);
    const homes = stageOrdinary(payload, target, meta, !hasSignal);
    try {
      return await decodeStaged(meta, target, kind, verify, homes, abandoned);
    } finally {
      current = null;
      // Every thread is done with the job's buffers: decodeStaged returns after the last range
      // and throws only after every worker answered (or, when disposed, once they are terminated).
      if (stopped !== null) void stopped.then(homes.release);
      else homes.release();
    }
  };

  const decodeStaged = async (
    meta: PayloadMeta,
    target: Uint16Array,
    kind: TaskKind,
    verify: boolean,
    homes: ReturnType<typeof stageOrdinary>,
    abandoned: () => boolean,
  ): Promise<Uint16Array> => {
    fillPool(callerDecodes);
    if (!callerDecodes) requireWorker();
    const units = taskUnits(meta, kind);
    // Both in shared memory (no range copied in or out): one more v3 task, the header's and
    // escape sections' digests, taken by whichever thread gets there (last: it is the smallest),
    // instead of this thread hashing them after all the others (0.05-0.06 ms at 2^24 on the VM).
    const outerTask = kind === 'segments' && homes.copyIn === null && !homes.staged;
    const taskCount = Math.min(units, TASKS_PER_THREAD * (threads + 1)) + (outerTask ? 1 : 0);
    const control = createControl(taskCount);
    current = { control, taskCount };
    const ready = homes.copyIn && new Int32Array(new SharedArrayBuffer(4 * taskCount));
    const segmentValues = SEGMENT_DIGESTS * units;
    const digests = kind === 'segments' ? new Uint32Array(new SharedArrayBuffer(4 * (segmentValues + (outerTask ? OUTER_DIGESTS : 0)))) : null;
    const wholeChecksum = verify && kind === 'chunks';
    const expected = taskCount + (wholeChecksum ? 1 : 0);
    // This thread waits only for the last item, unless it copies each range out as it lands.
    const doneTarget = homes.staged ? undefined : expected;
    const job: Omit<DecodeJob, 'id'> = {
      payload: homes.payload.ref,
      payloadOffset: homes.payload.offset,
      payloadLength: meta.compBytes,
      out: homes.out.ref,
      outOffset: homes.out.offset,
      control: control.buffer as SharedArrayBuffer,
      taskCount,
      kind,
      verify: wholeChecksum,
      digests: digests && (digests.buffer as SharedArrayBuffer),
      ready: ready && (ready.buffer as SharedArrayBuffer),
      doneTarget,
      ...(outerTask ? { outerTask } : {}),
    };
    // Versions 1 and 2: the calling thread takes the checksum (one sequential pass) before the
    // workers see the job, so that it never waits on a long unit held by a worker the scheduler
    // put aside: the workers hold only short ranges. Without callerDecodes the first worker to
    // wake takes it.
    const callerVerifies = wholeChecksum && callerDecodes && claimVerify(control);
    let workerError: unknown = null;
    let onWorkerError: () => void = () => undefined;
    const workerFailed = new Promise<void>((resolve) => (onWorkerError = resolve));
    const replies = pool.map((entry) => postJob(job, entry));
    // A late reply for a finished job must not go unhandled; a failure wakes the wait below.
    for (const reply of replies) {
      reply.catch((error: unknown) => {
        workerError ??= error;
        onWorkerError();
      });
    }
    const local = { payload: homes.payload.view, out: homes.out.view };
    // Ordinary `out`: this thread copies each range back as soon as it is decoded (by any thread),
    // overlapping the copy with the workers' decoding.
    const copied = new Uint8Array(taskCount);
    const copyReady = (): void => {
      // Abandoned (its signal fired, the caller's promise rejected): the caller's ordinary `out` is
      // not written after that rejection (only this thread copies into it).
      if (!homes.staged || abandoned()) return;
      for (let k = 0; k < taskCount; k++) {
        if (copied[k] === 0 && Atomics.load(control, CONTROL_TASK_DONE + k) === 1) {
          const [start, stop] = taskValues(k, taskCount, meta, kind);
          target.set(local.out.subarray(start, stop), start);
          copied[k] = 1;
        }
      }
    };
    let localError: unknown = null;
    let copyInFailed = false;
    try {
      // An ordinary payload: copy its codes and sm in range by range; the workers decode each
      // range as soon as it is in (only this thread can read the caller's memory).
      if (homes.copyIn !== null && ready !== null) {
        copyInFailed = true;
        copyInRanges(homes.copyIn, local.payload, meta, ready, kind);
        copyInFailed = false;
      }
      if (callerVerifies) runVerify(local.payload, meta, control, taskCount, doneTarget);
      if (callerDecodes) decodeClaimedTasks(local.payload, meta, local.out, control, taskCount, { kind, digests, doneTarget, outerTask }, copyReady);
      // Not with a staged `out`: this thread copies ranges back as they land (the loop below).
      const spinUntil = homes.staged ? 0 : performance.now() + SPIN_WAIT_MS;
      while (Atomics.load(control, CONTROL_DONE) < expected && Atomics.load(control, CONTROL_FAILED) === 0 && workerError === null && performance.now() < spinUntil);
      const blockUntil = performance.now() + BLOCKING_WAIT_MS;
      for (;;) {
        copyReady();
        const done = Atomics.load(control, CONTROL_DONE);
        if (done >= expected || Atomics.load(control, CONTROL_FAILED) !== 0 || workerError !== null) break;
        const left = blockUntil - performance.now();
        if (left > 0) {
          Atomics.wait(control, CONTROL_DONE, done, Math.min(left, 20));
        } else {
          const waiting = waitAsync(control, CONTROL_DONE, done, 50);
          if (waiting.async) await Promise.race([waiting.value, workerFailed]);
        }
      }
    } catch (error) {
      localError = error;
      markFailed(control, taskCount);
    }
    if (localError === null && workerError === null && Atomics.load(control, CONTROL_FAILED) === 0) {
      copyReady();
      // Every segment's digests are in: the combined checksum decides whether the values stand.
      if (digests !== null && outerTask) {
        verifyOuterDigests(local.payload, meta, digests.subarray(0, segmentValues), digests.subarray(segmentValues));
      } else if (digests !== null) {
        verifySegmentDigests(local.payload, meta, digests);
      }
      // The calling thread may have done every range while a worker was still loading: its
      // start-up death, if it comes, is this call's (before, a later call's, or none that ran).
      await awaitStarting();
      return target;
    }
    // Something failed: a bad checksum is reported before any decoding error (FORMAT.md order),
    // so check it here unless a thread already has (a worker may have given up waiting for the
    // copy-in; hashing twice is harmless), and hear from every worker. Not for an abandoned call:
    // its caller has its ABORTED already, and the hash of a whole payload would only hold this thread.
    let checksumError: unknown = null;
    if (verify && !isVerifyJudged(control) && !copyInFailed && !abandoned()) {
      try {
        verifyPayloadChecksum(local.payload, meta);
      } catch (error) {
        checksumError = error;
      }
    }
    const settled = await Promise.allSettled(replies);
    const errors = [checksumError, localError, ...settled.map((s) => (s.status === 'rejected' ? (s.reason as unknown) : null))].filter(
      (e) => e !== null,
    );
    throw errors.find((e) => isSplitZipError(e) && e.code === 'CHECKSUM_MISMATCH') ?? errors[0] ?? workerError;
  };

  const verifyOnWorker = async (payload: Uint8Array, gate: Int32Array | null): Promise<void> => {
    // Arguments first, before any header is read or memory allocated.
    if (gate !== null && !(gate instanceof Int32Array && gate.buffer instanceof SharedArrayBuffer && gate.length === 1)) {
      throw kernelsArgumentTypeError('gate', 'an Int32Array(1) over a SharedArrayBuffer', gate);
    }
    checkPayloadArray(payload);
    const meta = readPayloadMeta(payload);
    const placed = place(payload.subarray(0, meta.compBytes));
    if (placed === null) throw new KernelsError('INVALID_ARGUMENT', 'verifyChecksum needs a payload in shared memory', { argument: 'payload' });
    fillPool(false);
    requireWorker();
    const base = {
      payload: placed.ref,
      payloadOffset: placed.offset,
      payloadLength: meta.compBytes,
      out: placed.ref,
      outOffset: placed.offset,
      ready: null,
    };
    if (meta.version < 3) {
      // A job of no ranges: the worker claims the checksum, runs it and answers.
      const control = createControl(0);
      current = { control, taskCount: 0 };
      await postJob({ ...base, control: control.buffer as SharedArrayBuffer, taskCount: 0, kind: 'chunks', verify: true, digests: null }, pool[0]!);
      return;
    }
    // Version 3: every worker claims segment ranges and hashes them in place; their digests are
    // combined here. Every worker is heard from before this returns (none still reads the payload).
    const units = taskUnits(meta, 'digests');
    const taskCount = Math.min(units, TASKS_PER_THREAD * threads);
    const control = createControl(taskCount);
    current = { control, taskCount };
    const digests = new Uint32Array(new SharedArrayBuffer(4 * SEGMENT_DIGESTS * Math.max(1, units)));
    const job = {
      ...base,
      control: control.buffer as SharedArrayBuffer,
      taskCount,
      kind: 'digests' as const,
      verify: false,
      digests: digests.buffer as SharedArrayBuffer,
      gate: gate && (gate.buffer as SharedArrayBuffer),
    };
    const settled = taskCount === 0 ? [] : await Promise.allSettled(pool.map((entry) => postJob(job, entry)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    if (Atomics.load(control, CONTROL_DONE) < taskCount) {
      throw new KernelsError('WORKER_FAILED', 'checksum workers answered before hashing every segment', { done: Atomics.load(control, CONTROL_DONE), taskCount });
    }
    verifySegmentDigests(payload, meta, digests.subarray(0, SEGMENT_DIGESTS * units));
  };

  /**
   * Runs `work` in its turn (calls run one at a time). With a signal, the caller's promise rejects
   * ABORTED as soon as it fires: a call not yet started is skipped when its turn comes; the job of
   * one in flight is marked failed (its threads claim no more ranges and give up waiting on a gate
   * or copy-in), and the turn passes on only once that job settled (`queue`), so the pool is never
   * shared by two jobs.
   */
  const enqueue = <T>(call: string, signal: AbortSignal | undefined, work: (abandoned: () => boolean) => Promise<T>): Promise<T> => {
    if (signal?.aborted) return Promise.reject(abortedError(`${call} aborted before it started`, signal));
    let state: 'queued' | 'running' | 'settled' = 'queued';
    let abandoned = false;
    const run = queue.then(async () => {
      // Queued calls that had not started when dispose() ran are refused, not run on a dead pool.
      if (disposed) throw disposedError();
      if (abandoned) return undefined as T;
      state = 'running';
      try {
        return await work(() => abandoned);
      } finally {
        state = 'settled';
      }
    });
    queue = run.catch(() => undefined);
    if (signal === undefined) return run;
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        if (state === 'settled') return;
        abandoned = true;
        // Calls run one at a time: a job in flight now is this call's.
        if (state === 'running' && current !== null) markFailed(current.control, current.taskCount);
        reject(abortedError(`${call} aborted ${state === 'running' ? 'while it ran' : 'while it waited for its turn'}`, signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      run.then(
        (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  };

  return {
    threads,
    arena: userArena,
    get workerDeaths() {
      return workerDeaths;
    },
    get lastWorkerFailure() {
      return lastWorkerFailure;
    },

    // The arena's memory is shared (resolveArena checked it, createCodecArena made it so); the codec types its views wide.
    allocatePayload(byteLength) {
      return requireArena(userArena).allocate(byteLength) as Uint8Array<SharedArrayBuffer>;
    },

    allocateOutput(count) {
      return requireArena(userArena).allocateValues(count) as Uint16Array<SharedArrayBuffer>;
    },

    decode<TBuffer extends ArrayBufferLike = SharedArrayBuffer>(payload: Uint8Array, out?: Uint16Array<TBuffer>, decodeOptions?: WorkerDecodeOptions): Promise<Uint16Array<TBuffer>> {
      if (disposed) return Promise.reject(disposedError());
      let verify: boolean;
      let signal: AbortSignal | undefined;
      try {
        ({ verify, signal } = checkWorkerDecodeOptions(decodeOptions));
      } catch (error) {
        return Promise.reject(error);
      }
      // `out` itself, or without it a new array over a SharedArrayBuffer (TBuffer's default).
      return enqueue('decode', signal, (abandoned) => decodeParallel(payload, out, verify, signal !== undefined, abandoned)) as Promise<Uint16Array<TBuffer>>;
    },

    verifyChecksum(payload, verifyOptions) {
      if (disposed) return Promise.reject(disposedError());
      let gate: Int32Array | null = null;
      let signal: AbortSignal | undefined;
      try {
        if (verifyOptions !== undefined) {
          checkOptionsObject(verifyOptions, 'options', 'verifyChecksum');
          checkOptionKeys(verifyOptions, VERIFY_OPTIONS, 'verifyChecksum');
          // Read once: a getter is not read again when the call's turn comes.
          ({ gate = null, signal } = verifyOptions);
          checkSignalOption(signal);
        }
      } catch (error) {
        return Promise.reject(error);
      }
      return enqueue('verifyChecksum', signal, async () => {
        try {
          return await verifyOnWorker(payload, gate);
        } finally {
          current = null;
          // A version-1 or 2 check runs on one worker: the others it started may still be loading.
          await awaitStarting();
        }
      });
    },

    idle() {
      return queue.then(() => undefined);
    },

    async dispose() {
      // A second dispose() settles with the first, once every worker is terminated (it returned at once).
      if (disposed) return stopped ?? undefined;
      disposed = true;
      markDisposing();
      let markStopped: () => void = () => undefined;
      stopped = new Promise<void>((resolve) => (markStopped = resolve));
      // A job in flight may never finish (a gate never raised, a worker that never answers): its
      // threads are told to stop and its call rejects with DISPOSED now, before the pool goes.
      if (current !== null) markFailed(current.control, current.taskCount);
      for (const entry of pool) failPending(entry, disposedError());
      await queue;
      const workers = pool.splice(0);
      for (const entry of workers) failPending(entry, disposedError());
      // Not while a worker still loads its modules (see WorkerStart.ready); a worker that never
      // gets there (it died, or its start hangs) is terminated after WORKER_READY_WAIT_MS anyway.
      // Referenced meanwhile: Atomics.waitAsync holds no event loop, so with idle (unreferenced)
      // workers the process could end here with dispose() never settled.
      for (const entry of workers) entry.worker.ref();
      await Promise.all(workers.map((entry) => Promise.race([waitUntilReady(entry.ready, WORKER_READY_WAIT_MS), entry.exited])));
      for (const entry of workers) send(entry, { stop: true });
      await Promise.all(workers.map((entry) => entry.worker.terminate()));
      for (const entry of workers) {
        entry.jobs.close();
        entry.replies.close();
      }
      stage = null;
      arenas.clear();
      markStopped();
    },
  };
}

/** decode's options: a Kernels decode's (checkDecodeOptions' rules) and `signal`, each read once. */
function checkWorkerDecodeOptions(options: unknown): { verify: boolean; signal: AbortSignal | undefined } {
  if (options === undefined) return { verify: true, signal: undefined };
  checkOptionsObject(options, 'options', 'decode');
  checkOptionKeys(options, WORKER_DECODE_OPTIONS, 'decode');
  const { signal, ...rest } = options as WorkerDecodeOptions;
  checkSignalOption(signal);
  return { verify: checkDecodeOptions(rest, 'decode')?.verify !== false, signal };
}

/** Copies each task's codes and sm bytes (the last task's with the sections' padding) and marks it ready. */
function copyInRanges(from: Uint8Array, to: Uint8Array, meta: PayloadMeta, ready: Int32Array, kind: TaskKind): void {
  const { codes, sm, escapeIndex } = meta.layout;
  const taskCount = ready.length;
  for (let k = 0; k < taskCount; k++) {
    const [start, stop] = taskValues(k, taskCount, meta, kind);
    const last = k === taskCount - 1;
    const codesFrom = codes.offsetBytes + start / 2;
    const codesTo = last ? sm.offsetBytes : codes.offsetBytes + stop / 2;
    to.set(from.subarray(codesFrom, codesTo), codesFrom);
    const smTo = last ? escapeIndex.offsetBytes : sm.offsetBytes + stop;
    to.set(from.subarray(sm.offsetBytes + start, smTo), sm.offsetBytes + start);
    Atomics.store(ready, k, 1);
    Atomics.notify(ready, k);
  }
}

/**
 * Every option, before anything starts. Only undefined means the default: `threads: null` took
 * the default count, a misspelt key (`thread: 2`) was ignored, and a `workerUrl` that is neither a
 * URL nor a string made every worker die at start (with callerDecodes, unnoticed).
 */
function checkWorkerDecoderOptions(options: unknown): asserts options is WorkerDecoderOptions {
  checkOptionsObject(options);
  checkOptionKeys(options, WORKER_DECODER_OPTIONS, 'createWorkerDecoder');
  const { threads, minParallelElements, workerUrl, callerDecodes, splitChecksum, arenaBytes } = options as WorkerDecoderOptions;
  checkIntegerOption(threads, 'threads', 1, MAX_WORKER_THREADS);
  // Unchecked, -1 or "x" silently changed which path decodes (comparisons with NaN are false).
  checkIntegerOption(minParallelElements, 'minParallelElements', 0);
  checkBooleanOption(callerDecodes, 'callerDecodes');
  checkBooleanOption(splitChecksum, 'splitChecksum');
  checkIntegerOption(arenaBytes, 'arenaBytes', 0);
  if (workerUrl !== undefined && typeof workerUrl !== 'string' && !(workerUrl instanceof URL)) {
    throw kernelsArgumentTypeError('workerUrl', 'a URL or a string', workerUrl, { value: describeValue(workerUrl) });
  }
  if (workerUrl !== undefined) checkWorkerScript(workerUrl);
}

/**
 * A worker script Node's `Worker` takes: a path, absolute or `./`/`../` relative (to the working
 * directory), or a `file:` or `data:` URL object. Any other made `new Worker` throw on every call
 * (ERR_WORKER_PATH, ERR_INVALID_URL_SCHEME): an untyped TypeError from every parallel decode.
 */
function checkWorkerScript(workerUrl: URL | string): void {
  const refuse = (why: string): never => {
    // Shown cut (a data: URL's script can be megabytes); details.value keeps the caller's text as it was.
    const got = describeValue(String(workerUrl));
    throw new KernelsError('INVALID_ARGUMENT', `workerUrl ${why}, got ${got}`, { argument: 'workerUrl', got, value: String(workerUrl) });
  };
  if (workerUrl instanceof URL) {
    if (workerUrl.protocol !== 'file:' && workerUrl.protocol !== 'data:') refuse(`must be a file: or data: URL (a Worker loads no ${workerUrl.protocol} script)`);
    if (workerUrl.protocol === 'file:') checkScriptFile(workerUrl, refuse);
    return;
  }
  // Node's own rule (lib/internal/worker.js): a string is a path, never a URL.
  if (/^(file|data):/i.test(workerUrl)) refuse('as a string is a path, not a URL: pass new URL(...) for a file: or data: URL');
  if (!isAbsolute(workerUrl) && !/^\.\.?[\\/]/.test(workerUrl)) refuse('must be an absolute path or one starting with ./ or ../ (from the working directory), or a URL');
  checkScriptFile(workerUrl, refuse);
}

/**
 * The script a file: URL or path names is a file (findWorkerScriptProblem: the runtime's decode
 * threads check theirs by the same rule). A missing one was taken, every worker died at start, and
 * with callerDecodes the calling thread decoded alone from then on (a bundle's wrong path: nothing
 * said so but decoder.workerDeaths). createWorkerDecoder resolves a relative path to an absolute
 * one at once, so a later process.chdir does not move it.
 */
function checkScriptFile(script: URL | string, refuse: (why: string) => never): void {
  const problem = findWorkerScriptProblem(script);
  if (problem === undefined) return;
  if (problem.reason === 'not-local') refuse(`names no local file (${problem.message})`);
  if (problem.reason === 'unreadable') refuse(`names no file that can be read (${problem.code}: ${problem.path})`);
  refuse(`names something that is not a file (${problem.path})`);
}

/** The caller's arena (checked: shared, with a share per worker) or a new one of `arenaBytes`, or null. */
function resolveArena(options: WorkerDecoderOptions, threads: number): CodecArena | null {
  if (options.arena !== undefined && options.arenaBytes !== undefined) {
    throw new KernelsError('INVALID_ARGUMENT', 'pass arena or arenaBytes, not both', { argument: 'arena' });
  }
  if (options.arenaBytes !== undefined) {
    try {
      return createCodecArena(options.arenaBytes, { threads });
    } catch (error) {
      throw new KernelsError('INVALID_ARGUMENT', `could not create a ${options.arenaBytes}-byte shared arena: ${String(error)}`, {
        argument: 'arenaBytes',
        arenaBytes: options.arenaBytes,
      });
    }
  }
  const arena = options.arena;
  if (arena === undefined) return null;
  // arena?.: null is a misuse reported like any other non-arena, not a TypeError.
  if (!(arena?.buffer instanceof SharedArrayBuffer)) {
    throw kernelsArgumentTypeError('arena', 'shared: createCodecArena(bytes, { threads })', arena);
  }
  // Not arena.share(threads - 1): that hands the share out again, retiring a worker of another
  // decoder attached with it.
  if (typeof arena.threads !== 'number' || arena.threads < threads || typeof arena.shareFor !== 'function') {
    throw new KernelsError('INVALID_ARGUMENT', `arena must be created with threads >= ${threads} (one share per worker)`, { argument: 'arena', threads });
  }
  return arena;
}

/**
 * How long dispose() waits for a worker still starting before it terminates it regardless, and a
 * call for the workers it started (awaitStarting): ~20-50 ms on the loaded 2-core VM.
 */
const WORKER_READY_WAIT_MS = 2000;
/** At most this many calls in a row start no workers after start-up deaths (fillPool): a start that failed once for a passing cause (memory, threads) is tried again soon enough. */
const MAX_START_HELD_CALLS = 64;

/** Resolves once ready[0] is 1, or after `timeoutMs`. */
async function waitUntilReady(ready: Int32Array, timeoutMs: number): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (Atomics.load(ready, 0) === 0) {
    const left = until - performance.now();
    if (left <= 0) return;
    const waiting = waitAsync(ready, 0, 0, Math.min(left, 100));
    if (waiting.async) await waiting.value;
  }
}

/**
 * Lets this thread's event loop deliver the workers' 'error' and 'exit' events that have arrived.
 * Two immediates: called from an I/O callback, the first one runs before the loop polls again.
 */
async function hearWorkerEvents(): Promise<void> {
  for (let turn = 0; turn < 2; turn++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Atomics.waitAsync (Node ≥ 16; not in the ES2022 lib typings). */
const waitAsync = (Atomics as unknown as {
  waitAsync(array: Int32Array, index: number, value: number, timeoutMs: number): { async: boolean; value: Promise<unknown> | string };
}).waitAsync.bind(Atomics);

function disposedError(): KernelsError {
  return new KernelsError('DISPOSED', 'this worker decoder was disposed', {});
}

function requireArena(arena: CodecArena | null): CodecArena {
  if (arena === null) {
    throw new KernelsError('INVALID_ARGUMENT', 'this decoder has no arena: create it with arena or arenaBytes', { argument: 'arena' });
  }
  return arena;
}

function isShared(view: ArrayBufferView): boolean {
  return view.buffer instanceof SharedArrayBuffer;
}

function alignUp(bytes: number): number {
  return Math.ceil(bytes / ARENA_ALIGN_BYTES) * ARENA_ALIGN_BYTES;
}

function rebuildError(error: Extract<DecodeJobReply, { ok: false }>['error']): Error {
  if (error.splitZipCode) {
    const prefix = `${error.splitZipCode}: `;
    const message = error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
    return new SplitZipError(error.splitZipCode, message, error.details);
  }
  return new KernelsError('WORKER_FAILED', `decode worker failed: ${error.message}`, { reason: error.message });
}
