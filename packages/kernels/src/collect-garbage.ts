// A worker thread that attached a codec arena gives its share of the arena's memory back only when
// it collects garbage, and a decode worker allocates too little for V8 ever to collect on its own:
// every arena a loader dropped stayed mapped until the worker ended (measured by the runtime's
// probe: a server reloading a 200 MB model grew ~20 MB a load, 1.6 GB after 60 loads; with one
// arena for the weights, by the whole arena each reload). Workers call this once idle after a detach.
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let collector: (() => void) | null | undefined;

/**
 * Runs a full garbage collection of the calling thread (a worker's is ~1 ms): for worker threads
 * that detached a codec arena. A no-op where V8 exposes no collector.
 */
export function collectGarbage(): void {
  if (collector === undefined) collector = loadCollector();
  if (collector === null) return;
  collector();
  // A dead buffer's memory is released when V8's array-buffer sweeper is finalized on this thread,
  // which an idle worker never gets to; reading the heap statistics finalizes it. Measured (200 MB
  // model, 20 reloads): 640-650 MB RSS with the collection alone, 230-245 MB with this as well.
  getHeapStatistics();
}

function loadCollector(): (() => void) | null {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return exposed as () => void; // node --expose-gc
  try {
    // Already on for the process (set at run time, after this thread started): taken as it is, the
    // flag left alone.
    const already = runInNewContext('typeof gc === "function" ? gc : undefined') as unknown;
    if (typeof already === 'function') return already as () => void;
  } catch {
    return null;
  }
  try {
    // V8 installs `gc` in the contexts made while the flag is on: one context, then the flag back off.
    // The flag is the process's: a context another thread makes in between gets a `gc` global too.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as unknown;
    return typeof gc === 'function' ? (gc as () => void) : null;
  } catch {
    return null;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}
