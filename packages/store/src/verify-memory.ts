// The buffers of verify's entries in flight (verify-entries.ts), bounded in bytes: entries checked
// at once each need a blob buffer and a decode block, and a piecewise check allocates its own.

/** A buffer lent by VerifyMemory.take, to give back once its entry is checked. */
export interface VerifyLease {
  /** At least the bytes asked for (sizes are rounded up, so that a buffer serves the next entries too). */
  readonly buffer: Uint8Array;
  readonly reservedBytes: number;
  /** Lent from the one buffer kept for requests above the capacity. */
  readonly large: boolean;
}

interface Request {
  bufferBytes: number;
  reservedBytes: number;
  resolve: (lease: VerifyLease) => void;
  reject: (error: unknown) => void;
}

const EMPTY = new Uint8Array(0);
/** The smallest buffer made: small blobs of slightly different sizes share one size. */
const MIN_BUFFER_BYTES = 4096;

/** `bytes` rounded up to within 1/8 of it (a few sizes per power of two): a buffer kept fits later entries of about its size. */
function roundUpBytes(bytes: number): number {
  if (bytes <= MIN_BUFFER_BYTES) return MIN_BUFFER_BYTES;
  const step = 2 ** (Math.floor(Math.log2(bytes)) - 3);
  return Math.ceil(bytes / step) * step;
}

/**
 * Lends buffers, and reservations of memory the borrower allocates itself, holding at most
 * `capacityBytes` together, the buffers given back and kept for reuse included (making a buffer of
 * a MiB costs ~5 ms of page faults and collections; reusing one nothing): a request waits, first
 * come first served, until there is room, dropping kept buffers to make it. A request above the
 * capacity is served from one more buffer, kept for those and lent to one at a time (as large as
 * the largest asked for so far: verify's one buffer before). So at most `capacityBytes` plus the
 * largest such request are held; a borrower holds one lease at a time, so none waits forever.
 */
export class VerifyMemory {
  private readonly free: Uint8Array[] = [];
  /** Bytes of the kept buffers and of the leases out (their buffers and reservations). */
  private heldBytes = 0;
  private readonly waiting: Request[] = [];
  private large = EMPTY;
  private largeLent = false;
  private readonly largeWaiting: Request[] = [];

  constructor(
    private readonly capacityBytes: number,
    /** Kept buffers at most (about the entries in flight): finding one that fits stays cheap. */
    private readonly maxFreeBuffers: number,
  ) {}

  /** A buffer of at least `bufferBytes`, with `reservedBytes` more counted as held until it is given back. */
  take(bufferBytes: number, reservedBytes = 0): Promise<VerifyLease> {
    return new Promise((resolve, reject) => {
      const request = { bufferBytes, reservedBytes, resolve, reject };
      if (bufferBytes + reservedBytes > this.capacityBytes) {
        this.largeWaiting.push(request);
        this.serveLarge();
      } else {
        this.waiting.push(request);
        this.serve();
      }
    });
  }

  give(lease: VerifyLease): void {
    if (lease.large) {
      this.largeLent = false;
      this.serveLarge();
      return;
    }
    this.heldBytes -= lease.reservedBytes;
    if (lease.buffer.length > 0) {
      this.free.push(lease.buffer);
      if (this.free.length > this.maxFreeBuffers) this.dropSmallest();
    }
    this.serve();
  }

  private serve(): void {
    while (this.waiting.length > 0) {
      const request = this.waiting[0]!;
      let lease: VerifyLease | undefined;
      try {
        lease = this.tryLend(request);
      } catch (error) {
        // A buffer that could not be made: the borrower's failure, not the lender's.
        this.waiting.shift();
        request.reject(error);
        continue;
      }
      if (lease === undefined) return;
      this.waiting.shift();
      request.resolve(lease);
    }
  }

  private tryLend({ bufferBytes, reservedBytes }: Request): VerifyLease | undefined {
    if (bufferBytes === 0) {
      this.dropToFit(reservedBytes);
      if (this.heldBytes + reservedBytes > this.capacityBytes) return undefined;
      this.heldBytes += reservedBytes;
      return { buffer: EMPTY, reservedBytes, large: false };
    }
    const at = this.smallestFitting(bufferBytes);
    if (at >= 0) {
      // Still counted in heldBytes: lent now instead of kept.
      const buffer = this.free.splice(at, 1)[0]!;
      this.dropToFit(reservedBytes);
      if (this.heldBytes + reservedBytes <= this.capacityBytes) {
        this.heldBytes += reservedBytes;
        return { buffer, reservedBytes, large: false };
      }
      // Too large to lend beside this reservation: dropped, and one of the size asked for made below.
      this.heldBytes -= buffer.length;
    }
    const bytes = Math.min(roundUpBytes(bufferBytes), this.capacityBytes - reservedBytes);
    this.dropToFit(bytes + reservedBytes);
    if (this.heldBytes + bytes + reservedBytes > this.capacityBytes) return undefined;
    const buffer = new Uint8Array(bytes);
    this.heldBytes += bytes + reservedBytes;
    return { buffer, reservedBytes, large: false };
  }

  private serveLarge(): void {
    while (!this.largeLent && this.largeWaiting.length > 0) {
      const request = this.largeWaiting.shift()!;
      try {
        // The smaller one goes before the larger is made (as verify's one buffer grew).
        if (this.large.length < request.bufferBytes) {
          this.large = EMPTY;
          this.large = new Uint8Array(request.bufferBytes);
        }
      } catch (error) {
        request.reject(error);
        continue;
      }
      this.largeLent = true;
      request.resolve({ buffer: this.large, reservedBytes: 0, large: true });
    }
  }

  /** Index of the smallest kept buffer of at least `bytes`, or -1. */
  private smallestFitting(bytes: number): number {
    let at = -1;
    for (let i = 0; i < this.free.length; i++) {
      if (this.free[i]!.length >= bytes && (at < 0 || this.free[i]!.length < this.free[at]!.length)) at = i;
    }
    return at;
  }

  /** Drops kept buffers, smallest first, until `bytes` more fit or none is left. */
  private dropToFit(bytes: number): void {
    while (this.heldBytes + bytes > this.capacityBytes && this.free.length > 0) this.dropSmallest();
  }

  private dropSmallest(): void {
    let at = 0;
    for (let i = 1; i < this.free.length; i++) if (this.free[i]!.length < this.free[at]!.length) at = i;
    this.heldBytes -= this.free.splice(at, 1)[0]!.length;
  }
}
