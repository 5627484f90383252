// Reusable buffers for raw tensors and their payloads. A build reads every tensor into one of these
// and encodes into another, so steady state allocates nothing: no page faults on fresh memory, and
// no garbage whose late collection lets RSS drift above the memory bound.

/** A pooled buffer: shared memory when the pool is created `shared` (workers see it without a copy). */
export type PoolBuffer = ArrayBuffer | SharedArrayBuffer;

export interface BufferPool {
  /** A view of exactly `sizeBytes` at offset 0 of a pooled buffer (or a new one), now owned by the caller. */
  acquire(sizeBytes: number): Uint8Array;
  /** Gives a buffer back (possibly after a round trip through a worker). */
  release(buffer: PoolBuffer): void;
  /** Bytes held idle in the pool. */
  readonly idleBytes: number;
}

/** Below this, buffers are allocated at their exact size. */
export const SIZE_CLASS_MIN_BYTES = 64 * 1024;

/**
 * The capacity allocated for `sizeBytes`: from SIZE_CLASS_MIN_BYTES up, rounded up to a quarter
 * step between powers of two (2^k x 1, 1.25, 1.5, 1.75; at most 25 % more). Raw tensors and
 * payloads of many sizes then share a few classes, so a released buffer fits the next request
 * instead of being dropped while another is allocated (page faults, and garbage to collect).
 */
export function sizeClassOf(sizeBytes: number): number {
  if (sizeBytes <= SIZE_CLASS_MIN_BYTES) return sizeBytes;
  const step = 2 ** (Math.floor(Math.log2(sizeBytes)) - 2);
  return Math.ceil(sizeBytes / step) * step;
}

/**
 * `capBytes` bounds the buffers the pool keeps alive (idle plus handed out); a buffer released
 * beyond it is left to the GC (`onDrop` says how much, so the caller can collect). Reuse takes the
 * smallest idle buffer that fits. With `shared`, buffers are SharedArrayBuffers: a worker reads
 * them in place, and nothing is transferred back and forth (each transfer hands the receiving
 * thread a new ArrayBuffer, whose external memory V8 counts towards its next collection: measured
 * ~0.6 s of the main thread's GC per GB of tensors).
 */
export function createBufferPool(capBytes: number, onDrop: (bytes: number) => void = () => {}, options: { shared?: boolean } = {}): BufferPool {
  const idle: PoolBuffer[] = []; // ascending capacity
  let idleBytes = 0;
  let outBytes = 0;
  return {
    acquire(sizeBytes) {
      const index = idle.findIndex((buffer) => buffer.byteLength >= sizeBytes);
      let buffer: PoolBuffer;
      if (index !== -1) {
        buffer = idle.splice(index, 1)[0]!;
        idleBytes -= buffer.byteLength;
      } else {
        // Uninitialised memory: the read overwrites every byte before anyone looks at it.
        // allocUnsafeSlow never hands out a slice of Node's shared pool: the buffer is ours alone.
        // A SharedArrayBuffer is zeroed, but lazily (its pages are mapped on first touch).
        buffer = options.shared ? new SharedArrayBuffer(sizeClassOf(sizeBytes)) : (Buffer.allocUnsafeSlow(sizeClassOf(sizeBytes)).buffer as ArrayBuffer);
        // Make room: the new buffer counts against the cap, idle ones go first (largest first).
        while (idle.length > 0 && idleBytes + outBytes + buffer.byteLength > capBytes) {
          const dropped = idle.pop()!.byteLength;
          idleBytes -= dropped;
          onDrop(dropped);
        }
      }
      outBytes += buffer.byteLength;
      return new Uint8Array(buffer, 0, sizeBytes);
    },
    release(buffer) {
      outBytes = Math.max(0, outBytes - buffer.byteLength);
      if (buffer.byteLength === 0) return;
      if (idleBytes + outBytes + buffer.byteLength > capBytes) return onDrop(buffer.byteLength);
      let at = idle.findIndex((b) => b.byteLength >= buffer.byteLength);
      if (at === -1) at = idle.length;
      idle.splice(at, 0, buffer);
      idleBytes += buffer.byteLength;
    },
    get idleBytes() {
      return idleBytes;
    },
  };
}
