// Reusable raw-tensor buffers. A build reads every tensor into one of these and the workers hand
// them back, so steady state allocates nothing: no page faults on fresh memory, and no garbage
// whose late collection lets RSS drift above the memory bound.

export interface BufferPool {
  /** A view of exactly `sizeBytes` at offset 0 of a pooled buffer (or a new one), now owned by the caller. */
  acquire(sizeBytes: number): Uint8Array;
  /** Gives a buffer back (possibly after a round trip through a worker). */
  release(buffer: ArrayBuffer): void;
  /** Bytes held idle in the pool. */
  readonly idleBytes: number;
}

/**
 * `capBytes` bounds the buffers the pool keeps alive (idle plus handed out); a buffer released
 * beyond it is left to the GC (`onDrop` says how much, so the caller can collect). Reuse takes the
 * smallest idle buffer that fits.
 */
export function createBufferPool(capBytes: number, onDrop: (bytes: number) => void = () => {}): BufferPool {
  const idle: ArrayBuffer[] = []; // ascending capacity
  let idleBytes = 0;
  let outBytes = 0;
  return {
    acquire(sizeBytes) {
      const index = idle.findIndex((buffer) => buffer.byteLength >= sizeBytes);
      let buffer: ArrayBuffer;
      if (index !== -1) {
        buffer = idle.splice(index, 1)[0]!;
        idleBytes -= buffer.byteLength;
      } else {
        // Uninitialised memory: the read overwrites every byte before anyone looks at it.
        // allocUnsafeSlow never hands out a slice of Node's shared pool: the buffer is ours alone.
        buffer = Buffer.allocUnsafeSlow(sizeBytes).buffer as ArrayBuffer;
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
