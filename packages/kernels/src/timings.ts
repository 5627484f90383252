import type { StageTimings } from './types.js';

export function emptyTimings(): StageTimings {
  return { validateMs: 0, prepareMs: 0, uploadMs: 0, kernelMs: 0, readbackMs: 0, finishMs: 0, totalMs: 0 };
}
