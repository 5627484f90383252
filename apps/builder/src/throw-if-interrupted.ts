import { BuilderError } from './errors.js';

/**
 * The error for an aborted signal (Ctrl-C): INTERRUPTED, which the CLI turns into exit 130 (143
 * when the reason names SIGTERM in its `signal` property, as the CLI's own reasons do).
 */
export function interruptedError(signal: AbortSignal, note = ''): BuilderError {
  const reason = signal.reason instanceof Error ? signal.reason.message : 'interrupted';
  const name = (signal.reason as { signal?: unknown } | undefined)?.signal;
  return new BuilderError('INTERRUPTED', `${reason}${note}`, typeof name === 'string' ? { signal: name } : {});
}

/** Long work checks this between tensors. */
export function throwIfInterrupted(signal: AbortSignal | undefined, note = ''): void {
  if (signal?.aborted) throw interruptedError(signal, note);
}
