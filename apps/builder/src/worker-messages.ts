// Messages between the build's main thread and its calibration workers. The tensors and payload
// buffers live in the build's slab (create-slab-pool.ts), which each worker attaches to once, from a
// first `slab` message (the workers start before the model is open, so before the slab is sized);
// requests name ranges of it by offset, so nothing is copied or transferred.
import type { CodecArenaShare } from '@splitzip/codec';
import type { PayloadDigest } from '@splitzip/store';
import type { TensorCalibration } from './tensor-tasks.js';

export type WorkerRequest =
  /** The slab: what this worker attaches to (create-slab-pool.ts attachSlab). */
  | { type: 'slab'; share: CodecArenaShare }
  | {
      type: 'calibrate';
      id: number;
      offsetBytes: number;
      byteLength: number;
      coverageMin: number;
      /** Encode a tensor that passes the gate into this range of the slab. */
      encodeInto?: { offsetBytes: number; byteLength: number; chunkSize: number; digest: boolean };
    }
  /** The content key of a tensor: so the SHA-1 pass runs on the workers, not the main thread. */
  | { type: 'key'; id: number; offsetBytes: number; byteLength: number; shape: number[] };

export type CalibrateRequest = Extract<WorkerRequest, { type: 'calibrate' }>;

export type WorkerReply =
  | { type: 'ready' }
  /** `payloadBytes`: the payload's length at `encodeInto.offsetBytes`, or null when not encoded (then `payloadDigest` too). */
  | { type: 'calibrated'; id: number; calibration: TensorCalibration; payloadBytes: number | null; payloadDigest: PayloadDigest | null }
  | { type: 'keyed'; id: number; key: string }
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
