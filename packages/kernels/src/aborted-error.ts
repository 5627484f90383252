import { describeValue } from './check-options.js';
import { KernelsError } from './errors.js';

/**
 * ABORTED for a call whose signal fired: the signal's reason is the error's standard `cause` and
 * stays in `details.reason` (as the runtime's ABORTED), and the message names it, cut.
 */
export function abortedError(message: string, signal: AbortSignal): KernelsError {
  const reason: unknown = signal.reason;
  return new KernelsError('ABORTED', `${message} (the signal's reason: ${describeReason(reason)})`, { reason }, reason === undefined ? undefined : { cause: reason });
}

/** An Error (or DOMException) by its name and message, anything else as describeValue shows it. */
function describeReason(reason: unknown): string {
  if (reason instanceof Error || (typeof reason === 'object' && reason !== null && typeof (reason as { message?: unknown }).message === 'string')) {
    const { name, message } = reason as { name?: unknown; message: string };
    const text = typeof name === 'string' && name !== '' ? (message === '' ? name : `${name}: ${message}`) : message;
    return describeValue(text).slice('string "'.length, -1);
  }
  return describeValue(reason);
}
