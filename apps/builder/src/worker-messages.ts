// Messages between the build's main thread and its calibration workers. Raw tensor buffers are
// shared memory (read in place, never sent back) or travel by transfer both ways (to the worker,
// and back to the main thread, which encodes and pools them).
import type { TensorCalibration } from './tensor-tasks.js';

export type WorkerRequest = { type: 'calibrate'; id: number; buffer: ArrayBuffer | SharedArrayBuffer; byteLength: number; coverageMin: number };

export type WorkerReply =
  | { type: 'ready' }
  /** `buffer`: a transferred ArrayBuffer coming back (absent for shared memory). */
  | { type: 'calibrated'; id: number; calibration: TensorCalibration; buffer?: ArrayBuffer }
  | { type: 'error'; id: number; error: SerializedError; buffer?: ArrayBuffer };

export interface SerializedError {
  name: string;
  message: string;
  code?: string;
  stack?: string;
}

export function serializeError(error: unknown): SerializedError {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return {
      name: error.name,
      message: error.message,
      ...(typeof code === 'string' ? { code } : {}),
      ...(error.stack ? { stack: error.stack } : {}),
    };
  }
  return { name: 'Error', message: String(error) };
}

/** Rebuilds an error from a worker; the code survives so the CLI can still classify it. */
export function deserializeError(serialized: SerializedError): Error {
  const error = new Error(serialized.message) as Error & { code?: string };
  error.name = serialized.name;
  if (serialized.code !== undefined) error.code = serialized.code;
  if (serialized.stack !== undefined) error.stack = serialized.stack;
  return error;
}
