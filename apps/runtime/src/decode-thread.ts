// Worker body of the runtime's thread decoder (createThreadDecoder): decodes a whole payload and
// verifies its checksum in one pass, decodes a chunk range of it, decodes a segment range of a
// format-v3 payload and returns that range's checksum digests, or reads a payload from a blob file
// the loading thread opened and then decodes and verifies it, with payload and output in shared
// memory (no copies), or hashes a tensor's bytes to its content key, piece by piece (the runtime's
// check of raw bytes against a cache entry, off the loading thread). Memory is either a codec arena this thread attached to (the kernels then work in place)
// or a plain SharedArrayBuffer (the kernels copy blocks through their scratch area).
import { createHash, type Hash } from 'node:crypto';
import { readSync } from 'node:fs';
import { parentPort, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import {
  attachCodecArena,
  decode,
  decodeChunks,
  decodeSegments,
  readPayloadMeta,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  type AttachedCodecArena,
  type CodecArenaShare,
} from '@splitzip/codec';
import { collectGarbage } from '@splitzip/kernels/collect-garbage';
import { updateHash } from '@splitzip/store/content-key';
import { checkPayloadAgainstEntry } from './check-payload-against-entry.js';
import type { PayloadEntryFields } from './create-cpu-decoder.js';
import { MAX_READ_CHUNK_BYTES } from './create-file-reader.js';
import { RuntimeError } from './errors.js';

/** Where bytes live: a codec arena this thread attached (by id), or a SharedArrayBuffer. */
export type SharedRef = { arenaId: number; buffer?: undefined } | { arenaId?: undefined; buffer: SharedArrayBuffer };

export type DecodeThreadMessage =
  | { kind: 'attach'; arenaId: number; share: CodecArenaShare }
  | { kind: 'detach'; arenaId: number }
  | DecodeThreadJob;

export interface DecodeThreadJob {
  id: number;
  /**
   * decode: chunks [firstChunk, +chunkCount) without the checksum; decode-verify: the whole
   * payload, checksum and decode in one pass; decode-segments: segments [firstSegment, endSegment)
   * of a v3 payload, decoded and hashed in one pass, the digests returned (the caller verifies);
   * read-decode-verify: `payloadLength` bytes read from `fd` (from offset 0) into the payload's
   * place first, then decode-verify (the caller checks the header against its manifest after).
   */
  kind: 'decode' | 'decode-verify' | 'decode-segments' | 'read-decode-verify' | 'hash';
  /**
   * hash: the payload fields hold one piece of a tensor's bytes. A stream's pieces go to one
   * thread, in order; the first carries `prefix` (the store's formatContentKeyPrefix), the last
   * `last`, and its reply the content key (SHA-1 over the prefix, then every piece).
   */
  hash?: { stream: number; prefix?: string | undefined; last: boolean; /** Drop the stream's state (its sender gave up), hash nothing. */ discard?: boolean | undefined } | undefined;
  /** read-decode-verify: an open blob file (the loading thread opened and checked it, and closes it). */
  fd?: number;
  /** read-decode-verify: the manifest entry the header read must agree with, checked before decoding. */
  check?: { entry: PayloadEntryFields; blobPath: string } | undefined;
  /**
   * read-decode-verify: the values `out` has room for. The header was not checked against the
   * manifest yet, so a payload claiming another count is refused before anything is written.
   */
  outValues?: number;
  payload: SharedRef;
  payloadOffset: number;
  payloadLength: number;
  /** Where the values go; absent (not for decode-segments): the whole payload into an ArrayBuffer of its own, allocated here and transferred back. */
  out?: SharedRef;
  /** Byte offset of the first chunk's first value in `out`. */
  outOffset?: number;
  firstChunk?: number;
  chunkCount?: number;
  firstSegment?: number;
  endSegment?: number;
}

/** Sent once by a worker when its module has loaded and it takes jobs. */
export interface DecodeThreadReady {
  kind: 'ready';
}

export type DecodeThreadReply =
  | { id: number; ok: true; busyMs: number; readMs?: number; digests?: Uint32Array<ArrayBuffer>; values?: ArrayBuffer; key?: string }
  | { id: number; ok: false; error: { code: string; message: string; /** A RuntimeError's details (it is rebuilt as one). */ details?: Record<string, unknown> } };

const arenas = new Map<number, AttachedCodecArena>();

function bufferOf(ref: SharedRef): SharedArrayBuffer {
  if (ref.arenaId === undefined) return ref.buffer;
  const arena = arenas.get(ref.arenaId);
  if (arena === undefined) throw Object.assign(new Error(`arena ${ref.arenaId} is not attached to this thread`), { code: 'WORKER_ERROR' });
  return arena.buffer;
}

/**
 * Fills `target` from offset 0 of `fd` (short reads looped); a file that ends early is an error.
 * Exported for its test. One read asks for at most MAX_READ_CHUNK_BYTES: Node refuses a length
 * above 2^31 - 1, so a payload of 2-4 GiB could not be read in one call.
 */
export function readBlobFile(fd: number, target: Uint8Array, maxReadBytes = MAX_READ_CHUNK_BYTES): void {
  let done = 0;
  while (done < target.length) {
    const bytesRead = readSync(fd, target, done, Math.min(target.length - done, maxReadBytes), done);
    if (bytesRead === 0) {
      throw Object.assign(new Error(`blob file ended after ${done} bytes, ${target.length} expected`), { code: 'BLOB_SIZE_MISMATCH' });
    }
    done += bytesRead;
  }
}

interface JobResult {
  digests?: Uint32Array<ArrayBuffer> | undefined;
  /** A hash job's content key (its stream's last piece). */
  key?: string | undefined;
  /** The values of a job without `out`, in a buffer of their own (transferred back). */
  values?: ArrayBuffer | undefined;
}

/** Runs a job; a read-decode-verify job's read time is reported apart from its decode. */
function runJob(job: DecodeThreadJob): JobResult & { readMs: number } {
  const payload = new Uint8Array(bufferOf(job.payload), job.payloadOffset, job.payloadLength);
  let readMs = 0;
  if (job.kind === 'read-decode-verify') {
    const readStartMs = performance.now();
    readBlobFile(job.fd as number, payload);
    readMs = performance.now() - readStartMs;
  }
  if (job.kind === 'hash') return { readMs, key: hashPiece(job, payload) };
  return { readMs, ...decodeJob(job, payload) };
}

/** Content-key hashes in progress, by stream (at most one a tensor being checked through this thread). */
const hashes = new Map<number, Hash>();

/** Feeds one piece to its stream's hash; the key after the last piece. */
function hashPiece(job: DecodeThreadJob, piece: Uint8Array): string | undefined {
  const { stream, prefix, last, discard } = job.hash ?? { stream: -1, last: true };
  if (discard === true) {
    hashes.delete(stream);
    return undefined;
  }
  let hash = hashes.get(stream);
  if (prefix !== undefined) {
    hash = createHash('sha1').update(prefix, 'utf8');
    hashes.set(stream, hash);
  } else if (hash === undefined) {
    throw Object.assign(new Error(`hash stream ${stream} has no first piece on this thread`), { code: 'WORKER_ERROR' });
  }
  updateHash(hash, piece);
  if (!last) return undefined;
  hashes.delete(stream);
  return hash.digest('hex');
}

function decodeJob(job: DecodeThreadJob, payload: Uint8Array): JobResult {
  // The store's header checks, here and before decoding: the staging slot is this thread's, and
  // its next read may overwrite it before the loading thread could look.
  const meta = job.check !== undefined ? checkPayloadAgainstEntry(payload, job.check.entry, job.check.blobPath, { checksum: false }) : readPayloadMeta(payload);
  if (job.kind === 'read-decode-verify' && meta.elementCount !== job.outValues) {
    throw Object.assign(new Error(`blob holds ${meta.elementCount} values, the tensor ${job.outValues}`), { code: 'META_MISMATCH' });
  }
  if (job.out === undefined && job.kind !== 'decode-segments') {
    // The whole payload into a buffer of its own, first written here, so this thread, not the
    // loading one, takes the new pages' faults; handed over without a copy.
    const values = new ArrayBuffer(2 * meta.elementCount);
    decode(payload, new Uint16Array(values), job.kind === 'decode' ? { verify: false } : undefined);
    return { values };
  }
  const out = bufferOf(job.out as SharedRef);
  if (job.kind === 'decode-verify' || job.kind === 'read-decode-verify') {
    decode(payload, new Uint16Array(out, job.outOffset ?? 0, meta.elementCount));
    return {};
  }
  if (job.kind === 'decode-segments') {
    const firstSegment = job.firstSegment ?? 0;
    const endSegment = job.endSegment ?? firstSegment;
    const start = Math.min(meta.elementCount, firstSegment * SEGMENT_VALUES);
    const end = Math.min(meta.elementCount, endSegment * SEGMENT_VALUES);
    const digests = new Uint32Array(SEGMENT_DIGESTS * (endSegment - firstSegment));
    decodeSegments(payload, meta, firstSegment, endSegment, new Uint16Array(out, job.outOffset ?? 0, end - start), { digests });
    return { digests };
  }
  const firstChunk = job.firstChunk ?? 0;
  const chunkCount = job.chunkCount ?? meta.chunkCount;
  const start = firstChunk * meta.chunkSize;
  const count = Math.max(0, Math.min(meta.elementCount, (firstChunk + chunkCount) * meta.chunkSize) - start);
  decodeChunks(payload, meta, firstChunk, chunkCount, new Uint16Array(out, job.outOffset ?? 0, count));
  return {};
}

/** Handles one message; a job's answer is posted before this returns. */
function handleMessage(port: MessagePort, message: DecodeThreadMessage): void {
  if (message.kind === 'attach') {
    arenas.set(message.arenaId, attachCodecArena(message.share));
    return;
  }
  if (message.kind === 'detach') {
    arenas.delete(message.arenaId);
    detached = true;
    return;
  }
  // A caller's SharedArrayBuffer (not an arena) stays alive in this thread until it collects.
  if (message.payload.buffer !== undefined || message.out?.buffer !== undefined) heldSharedBuffers = true;
  let reply: DecodeThreadReply;
  const startMs = performance.now();
  try {
    const { digests, readMs, values, key } = runJob(message);
    reply = {
      id: message.id,
      ok: true,
      busyMs: performance.now() - startMs - readMs,
      ...(readMs > 0 ? { readMs } : {}),
      ...(digests ? { digests } : {}),
      ...(values ? { values } : {}),
      ...(key !== undefined ? { key } : {}),
    };
  } catch (error) {
    // A failed piece ends its stream (the loading thread hashes the tensor itself).
    if (message.hash !== undefined) hashes.delete(message.hash.stream);
    const code = (error as { code?: unknown } | null)?.code;
    reply = {
      id: message.id,
      ok: false,
      error: {
        code: typeof code === 'string' ? code : 'WORKER_ERROR',
        message: error instanceof Error ? error.message : String(error),
        ...(error instanceof RuntimeError ? { details: { ...error.details } } : {}),
      },
    };
  }
  const transfer: ArrayBuffer[] = [];
  if (reply.ok && reply.digests) transfer.push(reply.digests.buffer);
  if (reply.ok && reply.values) transfer.push(reply.values);
  port.postMessage(reply, transfer);
}

/** An arena was detached since this thread last collected its garbage. */
let detached = false;

/**
 * A job named a plain SharedArrayBuffer (the caller's output or tensor, a scratch buffer) since
 * this thread last collected its garbage: a worker allocates too little for V8 to collect on its
 * own, so a buffer its caller dropped stayed mapped (a 512 MiB tensor hashed in place kept 512 MB
 * resident until the decoder closed). Collected once the thread has been idle this long: not
 * between the jobs of a load.
 */
let heldSharedBuffers = false;
const IDLE_COLLECT_AFTER_MS = 250;
let idleCollect: ReturnType<typeof setTimeout> | undefined;

const port = parentPort;
if (port) {
  port.on('message', (first: DecodeThreadMessage) => {
    if (idleCollect !== undefined) clearTimeout(idleCollect);
    idleCollect = undefined;
    handleMessage(port, first);
    // Messages already waiting (the next job the loading thread queued while this one ran) are
    // taken here, in order, without a turn of the event loop in between: that turn cost a worker
    // 0.1-0.3 ms between two jobs (median; 1.07 GB page-cache load, ~40 jobs a worker).
    for (let next = receiveMessageOnPort(port); next !== undefined; next = receiveMessageOnPort(port)) {
      handleMessage(port, next.message as DecodeThreadMessage);
    }
    // Idle now: a detached arena's memory is freed only once this thread collects (kernels' collect-garbage.ts).
    if (detached) {
      detached = false;
      heldSharedBuffers = false;
      collectGarbage();
    } else if (heldSharedBuffers) {
      idleCollect = setTimeout(() => {
        idleCollect = undefined;
        heldSharedBuffers = false;
        collectGarbage();
      }, IDLE_COLLECT_AFTER_MS);
      // Never what keeps the thread (or its process) alive.
      idleCollect.unref();
    }
  });
  port.postMessage({ kind: 'ready' } satisfies DecodeThreadReady);
}
