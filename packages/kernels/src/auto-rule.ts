// The `auto` rule: per call, among the backends that started and passed their self-check, take
// the one with the highest MEASURED throughput for this operation at the measured size nearest
// (in log2) to the call's size. Numbers come from bench/run-bench.mjs (this repo's CI-class
// machine, Node and headless Chromium/SwiftShader) and device/run-h200.sh (H200, Node + Dawn);
// RESULTS.md and README.md hold the tables they were copied from. A backend with no measurement
// for a platform is never picked by `auto` (no guesses); `codec` is the floor.
import { checkChoiceOption, checkIntegerOption, kernelsArgumentTypeError } from './check-options.js';
import type { BackendName } from './types.js';

export type Operation = 'decode' | 'encode' | 'decodeToDevice';
const OPERATIONS: readonly Operation[] = ['decode', 'encode', 'decodeToDevice'];
const BACKENDS: readonly BackendName[] = ['webgpu', 'webgl2', 'webgl', 'webasm', 'cpu', 'codec'];
/** Which measurement set applies: the Node build or the browser build of this package. */
export type Platform = 'node' | 'browser';

/** GB/s of BF16 (2 bytes per value), end to end as the caller sees it. */
export interface ThroughputRow {
  backend: BackendName;
  operation: Operation;
  elementCount: number;
  gbPerSecond: number;
}

const rowsOf = (
  operation: Operation,
  sizes: readonly number[],
  rates: Partial<Record<BackendName, readonly number[]>>,
): ThroughputRow[] =>
  Object.entries(rates).flatMap(([backend, list]) =>
    (list ?? []).map((gbPerSecond, k) => ({ backend: backend as BackendName, operation, elementCount: sizes[k]!, gbPerSecond })),
  );

const H200 = [2 ** 20, 2 ** 24, 2 ** 26];
const LOCAL = [2 ** 20, 2 ** 24];

/**
 * GB/s of BF16, copied from measured runs (RESULTS.md):
 * - node: the H200 machine (16-core Xeon VM, Node 20 + Dawn), the only machine where webgpu runs
 *   in Node. decode: device/run-h200.sh readback, the means of the 2026-12-03 08:47 and 09:33 UTC
 *   runs (two hosts; webgpu = the native WGSL decoder, the checksum on the device, the pieced
 *   readback at its default 4 MiB x 3; codec = one thread, same rounds). decodeToDevice:
 *   device/run-h200.sh checksum, the means of the 06:37 and 07:41 UTC runs (two hosts, same defaults
 *   but the readback, which it does not do; codec = one thread, same runs). encode, webasm and cpu: the 2026-12-02 ~23:10 UTC full run (encode =
 *   gpu.js; webasm/cpu measured at 2^20 and 2^24 only). decodeToDevice on the codec is its host decode.
 * - browser: headless Chromium 156 on this repo's 2-core CI-class machine, SwiftShader (software
 *   WebGL/WebGPU), bench/run-bench.mjs, 2026-12-02 ~23:15 UTC (webgpu = the native WGSL decoder).
 *   No real-GPU browser has been measured.
 */
export const MEASURED_THROUGHPUT: Record<Platform, readonly ThroughputRow[]> = {
  node: [
    ...rowsOf('decode', H200, { codec: [2.5, 3.2, 2.96], webgpu: [1.64, 3.69, 3.61], webasm: [0.1, 0.13], cpu: [0.03, 0.04] }),
    ...rowsOf('decodeToDevice', H200, { codec: [3.02, 3.51, 3.18], webgpu: [2.36, 10.88, 9.51] }),
    ...rowsOf('encode', H200, { codec: [1.62, 1.14, 1.23], webgpu: [0.16, 0.24, 0.26] }),
  ],
  browser: [
    ...rowsOf('decode', LOCAL, {
      codec: [1.4, 4.58],
      webgpu: [0.15, 0.32],
      webgl2: [0.01, 0.01],
      webgl: [0.01, 0.01],
      webasm: [0.08, 0.1],
      cpu: [0.04, 0.05],
    }),
    ...rowsOf('decodeToDevice', LOCAL, {
      codec: [0.11, 0.31],
      webgpu: [0.22, 0.35],
      webgl2: [0.15, 0.07],
      webgl: [0.11, 0.02],
      webasm: [0.08, 0.09],
      cpu: [0.04, 0.05],
    }),
    ...rowsOf('encode', LOCAL, {
      codec: [0.13, 0.41],
      webgpu: [0.03, 0.03],
      webgl2: [0.01, 0.02],
      webgl: [0.01, 0.01],
      webasm: [0.06, 0.05],
      cpu: [0.04, 0.05],
    }),
  ],
};

const DEVICE_BACKENDS: readonly BackendName[] = ['webgpu', 'webgl2', 'webgl'];

/**
 * Another backend replaces the codec only when it measured this much faster: the same path moved
 * by more than 10% between two H200 hosts (webgpu end to end 1.19x and 1.01x the codec at 2^24
 * before the pieced readback; 1.16x and 1.13x after it), and the codec needs no device, no
 * readback and no start-up.
 */
export const CODEC_SWITCH_MARGIN = 1.1;

/** Whether a backend leaves decodeToDevice results on a GPU. */
export function isDeviceBackend(backend: BackendName): boolean {
  return DEVICE_BACKENDS.includes(backend);
}

/**
 * The backend `auto` uses for one call. `available` are the started, self-checked backends
 * (codec is always available). decodeToDevice considers GPU backends first: only they can leave
 * the result on a device; without one it is the codec (a host result).
 */
export function pickBackend(
  platform: Platform,
  operation: Operation,
  elementCount: number,
  available: readonly BackendName[],
  table: Record<Platform, readonly ThroughputRow[]> = MEASURED_THROUGHPUT,
): BackendName {
  checkRuleArguments(platform, table);
  // Unchecked, a misspelt operation picked the codec and a misspelt backend was never picked, unsaid.
  checkChoiceOption(operation, 'operation', OPERATIONS);
  // Any integer: a call's count comes from a header not yet validated (the codec then reports it).
  checkIntegerOption(elementCount, 'elementCount', 0, Infinity);
  if (!Array.isArray(available)) {
    throw kernelsArgumentTypeError('available', 'an array of backend names', available);
  }
  for (const backend of available) checkChoiceOption(backend, 'available[]', BACKENDS);
  const rows = table[platform].filter((r) => r.operation === operation && available.includes(r.backend));
  let pool = rows;
  if (operation === 'decodeToDevice') {
    const onDevice = rows.filter((r) => isDeviceBackend(r.backend));
    if (onDevice.length > 0) pool = onDevice;
  }
  let best: BackendName = 'codec';
  let bestRate = -1;
  for (const backend of new Set(pool.map((r) => r.backend))) {
    const measured = rateAt(pool.filter((r) => r.backend === backend), elementCount);
    const rate = backend === 'codec' ? measured * CODEC_SWITCH_MARGIN : measured;
    if (rate > bestRate) {
      best = backend;
      bestRate = rate;
    }
  }
  return best;
}

/**
 * Backends the rule can pick on a platform: each one that beats the codec for some operation and
 * measured size when it is the only other backend available. Only these are worth starting.
 */
export function candidateBackends(
  platform: Platform,
  table: Record<Platform, readonly ThroughputRow[]> = MEASURED_THROUGHPUT,
): BackendName[] {
  checkRuleArguments(platform, table);
  const winners = new Set<BackendName>();
  const rows = table[platform];
  const sizes = [...new Set(rows.map((r) => r.elementCount))];
  for (const backend of new Set(rows.map((r) => r.backend))) {
    if (backend === 'codec') continue;
    for (const operation of ['decode', 'encode', 'decodeToDevice'] as const) {
      for (const size of sizes) {
        if (pickBackend(platform, operation, size, ['codec', backend], table) === backend) winners.add(backend);
      }
    }
  }
  return [...winners];
}

/** `table` is an object and `platform` one of its keys ('node', 'browser'): a misspelt one was a bare TypeError. */
function checkRuleArguments(platform: unknown, table: unknown): void {
  if (typeof table !== 'object' || table === null) {
    throw kernelsArgumentTypeError('table', 'a measurement table like MEASURED_THROUGHPUT', table);
  }
  checkChoiceOption(platform, 'platform', Object.keys(table));
}

/** The measured rate at the size nearest in log2 to elementCount. */
function rateAt(rows: readonly ThroughputRow[], elementCount: number): number {
  const target = Math.log2(Math.max(1, elementCount));
  let best = rows[0]!;
  for (const row of rows) {
    if (Math.abs(Math.log2(row.elementCount) - target) < Math.abs(Math.log2(best.elementCount) - target)) best = row;
  }
  return best.gbPerSecond;
}

/**
 * The order `auto` starts backends in: every backend that beats the codec on a host operation,
 * then the GPU backends ranked by measured decodeToDevice speed at `elementCount`, of which only
 * the first that starts is needed (decodeToDevice needs one device backend, the best working one).
 */
export function autoStartOrder(
  platform: Platform,
  elementCount: number,
  table: Record<Platform, readonly ThroughputRow[]> = MEASURED_THROUGHPUT,
): { always: BackendName[]; firstOf: BackendName[] } {
  const candidates = candidateBackends(platform, table);
  const always = candidates.filter((backend) =>
    (['decode', 'encode'] as const).some((operation) =>
      table[platform]
        .filter((r) => r.operation === operation)
        .some((r) => pickBackend(platform, operation, r.elementCount, ['codec', backend], table) === backend),
    ),
  );
  const firstOf: BackendName[] = [];
  let rest = candidates.filter((b) => isDeviceBackend(b) && !always.includes(b));
  while (rest.length > 0) {
    const best = pickBackend(platform, 'decodeToDevice', elementCount, ['codec', ...rest], table);
    if (best === 'codec') break;
    firstOf.push(best);
    rest = rest.filter((b) => b !== best);
  }
  return { always, firstOf };
}
