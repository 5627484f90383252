// How much memory a build may use and how it is spent: the promised bound on the process's peak
// RSS (issue #6: 3 x the largest tensor + 150 MB, whatever the model), the slab (every tensor and
// payload in flight, create-slab-pool.ts) and the number of worker threads, each of which costs a
// fixed amount of RSS whatever it works on. Pure functions of the model's sizes: the build plans
// once the model's headers are parsed, before any tensor is read.

/** The bound on the build's peak RSS: this many times the largest tensor ... */
export const RSS_BOUND_LARGEST_FACTOR = 3;
/** ... plus this much (Node, the modules, the workers). */
export const RSS_BOUND_BASE_BYTES = 150e6;
/**
 * Floor of the slab: many small tensors may overlap up to this much (raw bytes plus their
 * payloads), so the workers stay busy on models of small tensors.
 */
export const MIN_IN_FLIGHT_BYTES = 32 * 1024 * 1024;
/**
 * The slab as a multiple of the largest tensor, at least MIN_IN_FLIGHT_BYTES. One largest tensor
 * needs ~1.8x (raw + worst payload); 3 lets three or more mid-sized tensors be keyed, calibrated
 * and written at once. Measured on the 1.16 GB synthetic model (largest 33.5 MB, --jobs 2, tmpfs):
 * 2.5x 3.1-4.6 s, 3x 2.9-3.4 s, 4x 2.9-3.1 s; peak RSS 188, 204, 238 MB.
 */
export const SLAB_LARGEST_FACTOR = 3;
/**
 * Peak RSS of the build process without its slab and workers: Node, the codec, the store, the
 * model's headers, buffers of reads and commits. Measured 2026-12-03 with bench/measure-rss.mjs:
 * `--jobs 0` on the 470 MiB model of small tensors peaks at 104 MB with a 33.5 MB slab (70 MB);
 * `--jobs 1` on the 2.25 GB model at 187 MB with a 101 MB slab and one worker (86 - 13 = 73 MB).
 */
export const PROCESS_RSS_BYTES = 75e6;
/**
 * Peak RSS one worker thread adds, whatever the model: its isolate and heap, the codec and its
 * WebAssembly instance (fixed-size block buffers; tensors and payloads stay in the slab). Measured
 * 2026-12-03 on the 470 MiB model of small tensors (same slab): --jobs 1/2/3/4/8 peak at
 * 117/129/141/151/198 MB, i.e. 10-13 MB per worker.
 */
export const WORKER_RSS_BYTES = 13e6;
/**
 * Kept free under the bound: peak RSS of identical runs differs by a few MB (when V8 collects,
 * how far the slab's pages have been touched), e.g. 193-198 MB for one configuration.
 */
export const RSS_HEADROOM_BYTES = 10e6;

/**
 * A model with at most this much BF16 to encode is built on the calling thread whatever --jobs
 * says: a worker's start-up (~80 ms of CPU, on the cores the build needs) costs more than it saves.
 * Measured 2026-12-04 on the 2-core VM, elapsed_s of --jobs 0 against --jobs 2 (3-8 rounds,
 * alternating): the default model (13.3 MiB of BF16) 177-189 ms against 256-300 ms; synthetic
 * models, on disk: 31 MiB 350-354 against 474-490, 59 MiB 352-376 against 431-453, 124 MiB
 * 616-674 against 683-767, 236 MiB 1043-1183 against 867-977 (workers win); on tmpfs: 124 MiB
 * 506-720 against 680-710, 192 MiB 852-904 against 689-713 (workers win).
 */
export const INLINE_MAX_BUILD_BYTES = 128 * 1024 * 1024;

/**
 * The worker threads to ask for: `jobs`, or 0 when the model's BF16 bytes to encode
 * (`encodableBytes`) are at most `inlineMaxBytes` (INLINE_MAX_BUILD_BYTES by default; 0 keeps
 * workers for any model with something to encode).
 */
export function resolveBuildJobs(jobs: number, encodableBytes: number, inlineMaxBytes: number = INLINE_MAX_BUILD_BYTES): number {
  return encodableBytes > inlineMaxBytes ? jobs : 0;
}

/** The promised bound on the build's peak RSS for a model whose largest tensor is `largestBytes`. */
export function computeRssBoundBytes(largestBytes: number): number {
  return RSS_BOUND_LARGEST_FACTOR * largestBytes + RSS_BOUND_BASE_BYTES;
}

export interface BuildMemoryInput {
  /** Worker threads asked for (`--jobs`): an upper limit; 0 runs everything on the calling thread. */
  jobs: number;
  /** The largest tensor the build may encode (BF16, within one payload's limit), bytes. */
  largestBytes: number;
  /** Tensors the build may encode (BF16, within one payload's limit); more workers would idle. */
  tensorCount: number;
  /** What one largest tensor holds in the slab (raw bytes and worst payload): the slab's floor. */
  largestInFlightBytes: number;
  /** A slab size asked for explicitly (raised to largestInFlightBytes); may exceed the bound. */
  maxInFlightBytes?: number;
}

export interface BuildMemoryPlan {
  /** The slab's size. */
  slabBytes: number;
  /** Worker threads to run: at most `jobs`, at least 1 unless `jobs` is 0. */
  workers: number;
  /** The bound the plan keeps to (computeRssBoundBytes of the largest tensor). */
  boundBytes: number;
}

/**
 * The slab has SLAB_LARGEST_FACTOR x the largest tensor (at least MIN_IN_FLIGHT_BYTES: it limits
 * how many tensors are in flight, so a smaller one would starve the workers it made room for,
 * and at least what one largest tensor holds in it), or the size asked for; as many workers run
 * as fit the rest of the bound beside that, up to `jobs` and the number of tensors to encode. At
 * least two workers fit any model (with the default slab), so a build's first workers can start
 * before the model is sized (countStartupWorkers).
 */
export function planBuildMemory(input: BuildMemoryInput): BuildMemoryPlan {
  const boundBytes = computeRssBoundBytes(input.largestBytes);
  const slabBytes = Math.max(
    input.maxInFlightBytes ?? Math.max(MIN_IN_FLIGHT_BYTES, Math.ceil(SLAB_LARGEST_FACTOR * input.largestBytes)),
    input.largestInFlightBytes,
  );
  let workers = 0;
  if (input.jobs > 0) {
    const fitting = Math.floor((boundBytes - RSS_HEADROOM_BYTES - PROCESS_RSS_BYTES - slabBytes) / WORKER_RSS_BYTES);
    // One worker even where none fits (only a slab asked for beyond the bound does that): the
    // caller asked for workers, and --jobs 0 is there to run without.
    workers = Math.max(1, Math.min(input.jobs, fitting, input.tensorCount));
  }
  // What the workers leave of the bound stays unused. Until 2026-12-04 the slab took it too, as
  // room for payloads waiting for their commit (5-10 % faster on disk then); now a payload's room
  // goes back as soon as its bytes are written (AddEntryInput.onPayloadWritten), not after the
  // fsync, and the larger slab only adds fresh pages (each first touch ~11 us on the VM measured).
  // --jobs 2 on the 1.16 GB model (largest 33.5 MB), 10 alternating in-process rounds: 101 MB
  // against 139 MB, disk 1.71 against 1.91 s, tmpfs 1.58 against 1.66 s (medians), 2.9 against
  // 3.3 CPU-s, 31 k against 41 k page faults.
  return { slabBytes, workers, boundBytes };
}

/**
 * Workers a build may start before it has sized its model's memory (to hide their start-up, ~80 ms
 * of CPU each, behind opening the cache and the first reads): as many as fit the bound of the smallest model,
 * up to `jobs`. The build starts the rest, if any fit, once the model is sized.
 */
export function countStartupWorkers(jobs: number): number {
  return planBuildMemory({ jobs, largestBytes: 0, tensorCount: Number.POSITIVE_INFINITY, largestInFlightBytes: 0 }).workers;
}
