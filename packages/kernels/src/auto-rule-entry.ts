// The `./auto-rule` export: the measured `auto` rule alone, with no backend code (no gpu.js, no
// Dawn), so that a caller can learn what `auto` would pick without loading them.
export { pickBackend, candidateBackends, MEASURED_THROUGHPUT, type Operation, type Platform, type ThroughputRow } from './auto-rule.js';
export type { BackendName } from './types.js';
