/**
 * The runtime's own decode backends (createCpuDecoder, createThreadDecoder, createWorkerPoolDecoder):
 * their decodes always settle, and may still write into a load's buffers until they do, so a load's
 * abort waits for them. One may settle early on the load's signal (createWorkerPoolDecoder: its
 * workers' call rejects at once) once nothing of the caller's is written any more, handing what
 * may still read the staging slot to DecodeCallOptions.onAbandoned. Any other backend (a custom DecodeBackend, a Kernels instance: a device that
 * hangs) is not waited for once the load's signal fires (serve-tensor's settleUnlessAborted).
 */
const settlingBackends = new WeakSet<object>();

/** Marks `backend` as one whose decodes always settle; returns it. */
export function markSettlingBackend<T extends object>(backend: T): T {
  settlingBackends.add(backend);
  return backend;
}

/** Whether `backend` is one of the runtime's own, whose decodes a load's abort waits for. */
export function isSettlingBackend(backend: object): boolean {
  return settlingBackends.has(backend);
}
