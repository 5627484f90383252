import { kernelsArgumentTypeError } from './check-options.js';
import { MAP_MODE, USAGE, type GpuBufferNative, type GpuDeviceNative } from './webgpu-types.js';

/**
 * Readback pieces: the device copies piece i + k into a kept MAP_READ staging buffer while the
 * host copies piece i out of another, so the device-to-staging copy runs behind the host's
 * memcpy instead of before it (one 128 MiB copy, then one 128 MiB memcpy, serially, before).
 */
export const DEFAULT_READBACK_PIECE_BYTES = 4 << 20;
/** Staging buffers in the ring (`readbackStagings`): pieces whose device copy is queued ahead of the host. */
export const DEFAULT_READBACK_STAGINGS = 3;
export const MAX_READBACK_STAGINGS = 8;
/** A piece is whole u32 words of BF16 pairs, 16-byte aligned (copy offsets: 4; map offsets: 8). */
const PIECE_ALIGN_BYTES = 16;
/** Kept buffers grow in steps of this, so slightly larger reads do not reallocate each time. */
const GROW_BYTES = 1 << 20;

const roundUp = (x: number, m: number): number => Math.ceil(x / m) * m;

/** `count` BF16 values at byte 0 of `source` (two per u32, buffer size >= roundUp(count, 8) * 2) for target[first, first + count). */
export interface ReadbackPart {
  source: GpuBufferNative;
  count: number;
  first: number;
}

export interface PiecedReadback {
  /**
   * Copies every part into `target`, in pieces through the staging ring. Resolves (or rejects)
   * only once every device copy it queued finished and every staging buffer is unmapped again.
   */
  read(parts: readonly ReadbackPart[], target: Uint16Array): Promise<void>;
  /** Staging buffers kept now (for tests). */
  readonly stagingBuffers: number;
  /** Staging buffers mapped now (for tests: 0 outside `read`). */
  readonly mappedStagings: number;
  destroy(): void;
}

interface Piece {
  source: GpuBufferNative;
  sourceOffset: number;
  bytes: number;
  count: number;
  first: number;
}

/** Checks the options; throws INVALID_ARGUMENT for a piece size or ring size out of range. */
export function checkReadbackOptions(pieceBytes: number, stagings: number): void {
  if (!(Number.isInteger(pieceBytes) && pieceBytes >= PIECE_ALIGN_BYTES && pieceBytes % PIECE_ALIGN_BYTES === 0)) {
    throw kernelsArgumentTypeError('webgpu.readbackPieceBytes', `a positive multiple of ${PIECE_ALIGN_BYTES}`, pieceBytes, { readbackPieceBytes: pieceBytes });
  }
  if (!(Number.isInteger(stagings) && stagings >= 1 && stagings <= MAX_READBACK_STAGINGS)) {
    throw kernelsArgumentTypeError('webgpu.readbackStagings', `an integer in 1..${MAX_READBACK_STAGINGS}`, stagings, { readbackStagings: stagings });
  }
}

/** Cuts the parts into pieces of at most `pieceBytes` (the last of each part may be less). */
function planPieces(parts: readonly ReadbackPart[], pieceBytes: number): Piece[] {
  const pieceValues = pieceBytes / 2;
  const pieces: Piece[] = [];
  for (const part of parts) {
    for (let at = 0; at < part.count; at += pieceValues) {
      const count = Math.min(pieceValues, part.count - at);
      pieces.push({ source: part.source, sourceOffset: 2 * at, bytes: roundUp(count, 8) * 2, count, first: part.first + at });
    }
  }
  return pieces;
}

/**
 * A ring of kept MAP_READ staging buffers on `device`. Each read queues the device copies of the
 * first `stagings` pieces (one submit) and their mappings, then per piece: waits for its
 * mapping, copies it into the target, unmaps, and queues the copy of the piece `stagings` ahead
 * into the buffer it freed.
 */
export function createPiecedReadback(device: GpuDeviceNative, pieceBytes = DEFAULT_READBACK_PIECE_BYTES, stagings = DEFAULT_READBACK_STAGINGS): PiecedReadback {
  checkReadbackOptions(pieceBytes, stagings);
  const ring: GpuBufferNative[] = [];
  let mapped = 0;

  const stagingFor = (slot: number, bytes: number): GpuBufferNative => {
    const kept = ring[slot];
    if (kept && kept.size >= bytes) return kept;
    kept?.destroy();
    const buffer = device.createBuffer({ size: roundUp(bytes, GROW_BYTES), usage: USAGE.MAP_READ | USAGE.COPY_DST });
    ring[slot] = buffer;
    return buffer;
  };

  return {
    async read(parts, target) {
      const pieces = planPieces(parts, pieceBytes);
      if (pieces.length === 0) return;
      const slots = Math.min(stagings, pieces.length);
      const biggest = Math.max(...pieces.map((p) => p.bytes));
      const buffers = Array.from({ length: slots }, (_, slot) => stagingFor(slot, biggest));
      /** Each slot's mapping in flight (its piece's copy queued before it), null once taken. */
      const inFlight: Array<Promise<void> | null> = new Array<Promise<void> | null>(slots).fill(null);
      const mapPiece = (i: number): void => {
        const slot = i % slots;
        const piece = pieces[i]!;
        const pending = buffers[slot]!.mapAsync(MAP_MODE.READ, 0, piece.bytes).then(() => {
          mapped++;
        });
        pending.catch(() => undefined); // awaited below; a device error is the caller's scope's to report
        inFlight[slot] = pending;
      };
      const queueCopies = (from: number, to: number): void => {
        const encoder = device.createCommandEncoder();
        for (let i = from; i < to; i++) {
          const piece = pieces[i]!;
          encoder.copyBufferToBuffer(piece.source, piece.sourceOffset, buffers[i % slots]!, 0, piece.bytes);
        }
        device.queue.submit([encoder.finish()]);
        for (let i = from; i < to; i++) mapPiece(i);
      };
      try {
        queueCopies(0, slots);
        for (const [i, piece] of pieces.entries()) {
          const slot = i % slots;
          const buffer = buffers[slot]!;
          await inFlight[slot];
          inFlight[slot] = null;
          try {
            target.set(new Uint16Array(buffer.getMappedRange(0, piece.bytes), 0, piece.count), piece.first);
          } finally {
            buffer.unmap();
            mapped--;
          }
          if (i + slots < pieces.length) queueCopies(i + slots, i + slots + 1);
        }
      } catch (error) {
        // Nothing returns while a copy queued here still runs (it reads the caller's buffers) or
        // a staging buffer stays mapped (the next read copies into it).
        for (const [slot, pending] of inFlight.entries()) {
          if (pending === null) continue;
          await pending.then(
            () => {
              buffers[slot]!.unmap();
              mapped--;
            },
            () => undefined,
          );
        }
        throw error;
      }
    },

    get stagingBuffers() {
      return ring.length;
    },

    get mappedStagings() {
      return mapped;
    },

    destroy() {
      for (const buffer of ring) buffer.destroy();
      ring.length = 0;
    },
  };
}
