// Worker body of the runtime's thread decoder (createThreadDecoder): verifies a payload's checksum,
// decodes a chunk range of it, or both in one pass, with payload and output in shared memory (no
// copies). Memory is either a codec arena this thread attached to (the kernels then work in place)
// or a plain SharedArrayBuffer (the kernels copy blocks through their scratch area).
import { parentPort } from 'node:worker_threads';
import {
  attachCodecArena,
  decode,
  decodeChunks,
  readPayloadMeta,
  verifyPayloadChecksum,
  type AttachedCodecArena,
  type CodecArenaShare,
} from '@splitzip/codec';

/** Where bytes live: a codec arena this thread attached (by id), or a SharedArrayBuffer. */
export type SharedRef = { arenaId: number; buffer?: undefined } | { arenaId?: undefined; buffer: SharedArrayBuffer };

export type DecodeThreadMessage =
  | { kind: 'attach'; arenaId: number; share: CodecArenaShare }
  | { kind: 'detach'; arenaId: number }
  | DecodeThreadJob;

export interface DecodeThreadJob {
  id: number;
  /**
   * checksum: verify only; decode: chunks [firstChunk, +chunkCount) without the checksum;
   * decode-verify: the whole payload, checksum and decode in one pass.
   */
  kind: 'checksum' | 'decode' | 'decode-verify';
  payload: SharedRef;
  payloadOffset: number;
  payloadLength: number;
  out?: SharedRef;
  /** Byte offset of the first chunk's first value in `out`. */
  outOffset?: number;
  firstChunk?: number;
  chunkCount?: number;
}

export type DecodeThreadReply =
  | { id: number; ok: true; busyMs: number }
  | { id: number; ok: false; error: { code: string; message: string } };

const arenas = new Map<number, AttachedCodecArena>();

function bufferOf(ref: SharedRef): SharedArrayBuffer {
  if (ref.arenaId === undefined) return ref.buffer;
  const arena = arenas.get(ref.arenaId);
  if (arena === undefined) throw Object.assign(new Error(`arena ${ref.arenaId} is not attached to this thread`), { code: 'WORKER_ERROR' });
  return arena.buffer;
}

function runJob(job: DecodeThreadJob): void {
  const payload = new Uint8Array(bufferOf(job.payload), job.payloadOffset, job.payloadLength);
  const meta = readPayloadMeta(payload);
  if (job.kind === 'checksum') {
    verifyPayloadChecksum(payload, meta);
    return;
  }
  const out = bufferOf(job.out as SharedRef);
  if (job.kind === 'decode-verify') {
    decode(payload, new Uint16Array(out, job.outOffset ?? 0, meta.elementCount));
    return;
  }
  const firstChunk = job.firstChunk ?? 0;
  const chunkCount = job.chunkCount ?? meta.chunkCount;
  const start = firstChunk * meta.chunkSize;
  const count = Math.max(0, Math.min(meta.elementCount, (firstChunk + chunkCount) * meta.chunkSize) - start);
  decodeChunks(payload, meta, firstChunk, chunkCount, new Uint16Array(out, job.outOffset ?? 0, count));
}

const port = parentPort;
if (port) {
  port.on('message', (message: DecodeThreadMessage) => {
    if (message.kind === 'attach') {
      arenas.set(message.arenaId, attachCodecArena(message.share));
      return;
    }
    if (message.kind === 'detach') {
      arenas.delete(message.arenaId);
      return;
    }
    let reply: DecodeThreadReply;
    const startMs = performance.now();
    try {
      runJob(message);
      reply = { id: message.id, ok: true, busyMs: performance.now() - startMs };
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      reply = {
        id: message.id,
        ok: false,
        error: { code: typeof code === 'string' ? code : 'WORKER_ERROR', message: error instanceof Error ? error.message : String(error) },
      };
    }
    port.postMessage(reply);
  });
}
