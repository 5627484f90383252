// Messages between the build's main thread and its encode workers.
import type { TensorAnalysis } from './tensor-tasks.js';

export type WorkerRequest =
  | { type: 'analyze'; id: number; buffer: ArrayBuffer; byteLength: number; shape: number[]; chunkSize: number }
  | { type: 'encode'; id: number }
  | { type: 'drop'; id: number };

export type WorkerReply =
  | { type: 'ready'; backend: string; fallbackReason: string | null }
  | { type: 'analyzed'; id: number; analysis: TensorAnalysis }
  | { type: 'encoded'; id: number; payload: ArrayBuffer; payloadBytes: number; sha256: string }
  | { type: 'error'; id: number; error: SerializedError };

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
