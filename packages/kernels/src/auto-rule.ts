// The `auto` rule: per call, among the backends that started and passed their self-check, take
// the one with the highest MEASURED throughput for this operation at the measured size nearest
// (in log2) to the call's size. Numbers come from bench/run-bench.mjs (this repo's CI-class
// machine, Node and headless Chromium/SwiftShader) and device/run-h200.sh (H200, Node + Dawn);
// RESULTS.md and README.md hold the tables they were copied from. A backend with no measurement
// for a platform is never picked by `auto` (no guesses); `codec` is the floor.
import type { BackendName } from './types.js';

export type Operation = 'decode' | 'encode' | 'decodeToDevice';
/** Which measurement set applies: the Node build or the browser build of this package. */
export type Platform = 'node' | 'browser';

/** GB/s of BF16 (2 bytes per value), end to end as the caller sees it. */
export interface ThroughputRow {
  backend: BackendName;
  operation: Operation;
  elementCount: number;
  gbPerSecond: number;
}

/** Filled from measured runs; see the file comment for where each number comes from. */
export const MEASURED_THROUGHPUT: Record<Platform, readonly ThroughputRow[]> = {
  node: [],
  browser: [],
};

const DEVICE_BACKENDS: readonly BackendName[] = ['webgpu', 'webgl2', 'webgl'];

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
  const rows = table[platform].filter((r) => r.operation === operation && available.includes(r.backend));
  let pool = rows;
  if (operation === 'decodeToDevice') {
    const onDevice = rows.filter((r) => isDeviceBackend(r.backend));
    if (onDevice.length > 0) pool = onDevice;
  }
  let best: BackendName = 'codec';
  let bestRate = -1;
  for (const backend of new Set(pool.map((r) => r.backend))) {
    const rate = rateAt(pool.filter((r) => r.backend === backend), elementCount);
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

/** The measured rate at the size nearest in log2 to elementCount. */
function rateAt(rows: readonly ThroughputRow[], elementCount: number): number {
  const target = Math.log2(Math.max(1, elementCount));
  let best = rows[0]!;
  for (const row of rows) {
    if (Math.abs(Math.log2(row.elementCount) - target) < Math.abs(Math.log2(best.elementCount) - target)) best = row;
  }
  return best.gbPerSecond;
}
