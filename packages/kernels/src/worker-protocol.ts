import type { SplitZipErrorCode } from '@splitzip/codec';

export interface DecodeTask {
  id: number;
  payload: SharedArrayBuffer;
  payloadOffset: number;
  payloadLength: number;
  out: SharedArrayBuffer;
  /** Byte offset of value 0 in `out`. */
  outOffset: number;
  firstChunk: number;
  chunkCount: number;
}

export type DecodeTaskReply =
  | { id: number; ok: true }
  | {
      id: number;
      ok: false;
      error: { message: string; splitZipCode: SplitZipErrorCode | null; details: Record<string, unknown> };
    };
