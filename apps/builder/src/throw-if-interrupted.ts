import { BuilderError } from './errors.js';

/** The error for an aborted signal (Ctrl-C): INTERRUPTED, which the CLI turns into exit 130. */
export function interruptedError(signal: AbortSignal, note = ''): BuilderError {
  const reason = signal.reason instanceof Error ? signal.reason.message : 'interrupted';
  return new BuilderError('INTERRUPTED', `${reason}${note}`);
}

/** Long work checks this between tensors. */
export function throwIfInterrupted(signal: AbortSignal | undefined, note = ''): void {
  if (signal?.aborted) throw interruptedError(signal, note);
}
