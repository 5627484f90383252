// Messages between the build's main thread and its hashing workers. Raw tensor buffers travel by
// transfer both ways (to the worker, and back to the main thread, which encodes and pools them).
import type { TensorCalibration } from './tensor-tasks.js';

export type WorkerRequest =
  // With `coverageMin`, the worker calibrates at once (one round trip) and sends the buffer back.
  | { type: 'hash'; id: number; buffer: ArrayBuffer; byteLength: number; shape: number[]; coverageMin?: number }
  | { type: 'calibrate'; id: number; coverageMin: number }
  | { type: 'drop'; id: number };

export type WorkerReply =
  | { type: 'ready' }
  | { type: 'hashed'; id: number; key: string; calibration?: TensorCalibration; buffer?: ArrayBuffer }
  | { type: 'calibrated'; id: number; calibration: TensorCalibration; buffer: ArrayBuffer }
  | { type: 'dropped'; id: number; buffer: ArrayBuffer }
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
