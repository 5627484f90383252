import { createHash, timingSafeEqual } from 'node:crypto';
import { normalizeEtag } from './normalize-etag.js';
import type { ReadThroughCache } from './read-through-cache.js';

/**
 * Largest raw object range kept in a read-through directory. A range is written from a private copy
 * (the caller owns its buffer once the read returns), and a local hit is hashed whole before a byte
 * of it is served (SHA-256 at ~1.7 GB/s on the team's box: ~40 ms here). Safetensors tensors above
 * it are rare outside embeddings; larger ranges are fetched every time (counted as `bypassed`).
 */
export const MAX_READ_THROUGH_RANGE_BYTES = 64 * 2 ** 20;

/**
 * Bytes of range copies being written in the background at once (4 of the largest ranges). A range
 * that would pass it is written before its read returns instead, from the caller's buffer (no copy),
 * so a fast fetch cannot pile up unbounded memory behind a slow disk.
 */
export const MAX_PENDING_RANGE_WRITE_BYTES = 4 * MAX_READ_THROUGH_RANGE_BYTES;

/** Written at the start of every range file: a format tag, then the identity and content digests. */
const MAGIC = new TextEncoder().encode('SZRANGE1');
const DIGEST_BYTES = 32;
/** magic (8) | SHA-256 of the identity (32) | SHA-256 of the range bytes (32), then the bytes. */
export const RANGE_FILE_HEADER_BYTES = MAGIC.length + 2 * DIGEST_BYTES;

/**
 * One version of a byte range of one object: an object is its bucket, key, ETag and size (a replaced
 * object has another ETag, so another identity: its old local copies are never found). No endpoint:
 * an ETag is derived from the content (MD5 of it, or of its parts) or unique per write, so the same
 * (bucket, key, ETag, size) names the same bytes however the server is reached (a caller's client
 * or the environment's endpoint).
 */
export interface RangeIdentity {
  bucket: string;
  key: string;
  etag: string;
  sizeBytes: number;
  offsetBytes: number;
  lengthBytes: number;
}

/** Counters of one source's read-through ranges (cumulative). */
export interface ReadThroughRangeStats {
  /** Reads served from a verified local file. */
  hits: number;
  /** Reads that found no usable local file (absent, another size, unreadable). */
  misses: number;
  /** Local files that failed their checks: removed and fetched again. */
  damaged: number;
  /** Range files written. */
  written: number;
  /** Range files that could not be written (full disk, read-only directory): ignored. */
  writeFailures: number;
  /** Reads never looked up locally: above MAX_READ_THROUGH_RANGE_BYTES, or an object without an ETag. */
  bypassed: number;
  /** Range files dropped by their reader (drop), or by distrust: bytes that failed a check the file's own digest cannot make, or were kept before such a failure. */
  dropped: number;
  /** Fetched ranges not kept because the source was distrusted (distrust): served, fetched again next time. */
  distrusted: number;
}

function sha256(bytes: Uint8Array): Buffer {
  return createHash('sha256').update(bytes).digest();
}

function identityDigest(identity: RangeIdentity): Buffer {
  const { bucket, key, etag, sizeBytes, offsetBytes, lengthBytes } = identity;
  return createHash('sha256')
    .update(JSON.stringify(['splitzip-read-through-range', 1, bucket, key, normalizeEtag(etag), sizeBytes, offsetBytes, lengthBytes]))
    .digest();
}

/**
 * Raw object ranges in a read-through directory (e.g. the heads and uncached tensors of an S3
 * model), one file per range named by the SHA-256 of its identity (`range.<hex>.bin`). Each file
 * carries its own check (identity and content digests): a file that fails is removed and reported a
 * miss, so unverified bytes are never served. Writes never fail a read: errors are counted.
 */
export class ReadThroughRanges {
  private readonly counters: ReadThroughRangeStats = { hits: 0, misses: 0, damaged: 0, written: 0, writeFailures: 0, bypassed: 0, dropped: 0, distrusted: 0 };
  /**
   * Names of the files this instance wrote (or is writing): what distrust drops. One short name per
   * range read (a model's tensors: thousands, ~80 bytes each).
   */
  private readonly keptNames = new Set<string>();
  /** Set by distrust: nothing more is kept. */
  private distrusting: Promise<void> | undefined;
  private pendingBytes = 0;
  private readonly pending = new Set<Promise<void>>();
  /** Background writes by file name: a drop waits for the range's write, so a dropped copy cannot land after it. */
  private readonly pendingByName = new Map<string, Promise<void>>();

  /** `fileTag` starts each file's name (`<tag>.<identity sha256>.bin`): one directory keeps apart the kinds of ranges it holds. */
  constructor(
    private readonly files: ReadThroughCache,
    private readonly fileTag = 'range',
  ) {}

  /** Whether a range of this many bytes is kept locally; counts it bypassed when not. */
  accepts(lengthBytes: number): boolean {
    if (lengthBytes > 0 && lengthBytes <= MAX_READ_THROUGH_RANGE_BYTES) return true;
    if (lengthBytes > 0) this.counters.bypassed++;
    return false;
  }

  /** Counts a read that was not looked up locally for another reason (the object has no ETag). */
  countBypassed(): void {
    this.counters.bypassed++;
  }

  stats(): ReadThroughRangeStats {
    return { ...this.counters };
  }

  /**
   * Fills `target` (exactly `identity.lengthBytes`) from the range's local file. True only when the
   * file held exactly that identity and its bytes hash to the digest it carries; otherwise false, with
   * `target` overwritten (the caller fetches into it) and a damaged file removed.
   */
  async readInto(identity: RangeIdentity, target: Uint8Array): Promise<boolean> {
    const expected = identityDigest(identity);
    const name = this.fileName(expected);
    const header = new Uint8Array(RANGE_FILE_HEADER_BYTES);
    let found: boolean;
    try {
      found = await this.files.readFileInto(name, [header, target]);
    } catch {
      found = false; // unreadable (permissions, I/O error): a miss, the fetch serves the read
    }
    if (!found) {
      this.counters.misses++;
      return false;
    }
    const magicOk = timingSafeEqual(header.subarray(0, MAGIC.length), MAGIC);
    const identityOk = timingSafeEqual(header.subarray(MAGIC.length, MAGIC.length + DIGEST_BYTES), expected);
    const contentOk = timingSafeEqual(header.subarray(MAGIC.length + DIGEST_BYTES), sha256(target));
    if (magicOk && identityOk && contentOk) {
      this.counters.hits++;
      return true;
    }
    this.counters.damaged++;
    this.counters.misses++;
    await this.files.removeFile(name);
    return false;
  }

  /**
   * Keeps `bytes` (fetched for `identity`, exactly its length) as the range's file: hashed now, then
   * written from a copy in the background, or, past MAX_PENDING_RANGE_WRITE_BYTES, written before
   * this resolves. Never rejects: a failed write is counted and the file is simply not there.
   */
  async keep(identity: RangeIdentity, bytes: Uint8Array): Promise<void> {
    if (this.distrusting !== undefined) {
      this.counters.distrusted++;
      return;
    }
    const digest = identityDigest(identity);
    const header = new Uint8Array(RANGE_FILE_HEADER_BYTES);
    header.set(MAGIC, 0);
    header.set(digest, MAGIC.length);
    header.set(sha256(bytes), MAGIC.length + DIGEST_BYTES);
    const name = this.fileName(digest);
    this.keptNames.add(name);
    const write = (body: Uint8Array) =>
      this.files.writeFile(name, [header, body]).then(
        () => {
          this.counters.written++;
        },
        () => {
          this.counters.writeFailures++;
        },
      );
    if (this.pendingBytes + bytes.length > MAX_PENDING_RANGE_WRITE_BYTES) {
      // Tracked like a background write: a drop or distrust meanwhile waits for it.
      const inline = write(bytes).finally(() => {
        this.pending.delete(inline);
        if (this.pendingByName.get(name) === inline) this.pendingByName.delete(name);
      });
      this.pending.add(inline);
      this.pendingByName.set(name, inline);
      await inline;
      return;
    }
    const copy = new Uint8Array(bytes); // a copy even of a Buffer, whose `slice` is a view
    this.pendingBytes += copy.length;
    const task = write(copy).finally(() => {
      this.pendingBytes -= copy.length;
      this.pending.delete(task);
      if (this.pendingByName.get(name) === task) this.pendingByName.delete(name);
    });
    this.pending.add(task);
    this.pendingByName.set(name, task);
  }

  /**
   * Removes the range's file, after its background write if one is running. For bytes the file's
   * own digest cannot judge: it only proves they are what was fetched, and a GET body damaged in
   * transit (right length, wrong bytes) was hashed as it came. The caller found them wrong another
   * way (a content key, a parse): the next read of the range fetches it again. Never rejects.
   */
  async drop(identity: RangeIdentity): Promise<void> {
    const name = this.fileName(identityDigest(identity));
    await this.pendingByName.get(name);
    await this.files.removeFile(name);
    this.counters.dropped++;
  }

  /**
   * Drops every file this instance wrote (after its background write), and keeps nothing from now
   * on (`distrusted` counts what is not kept). For a source one of whose bodies was found damaged in
   * transit: its other ranges came the same way, and nothing can check them. Files other instances
   * (earlier loads) wrote stay: each passed its own reads then. Idempotent; never rejects.
   */
  distrust(): Promise<void> {
    this.distrusting ??= (async () => {
      await this.settle();
      const names = [...this.keptNames];
      this.keptNames.clear();
      await Promise.all(names.map((name) => this.files.removeFile(name)));
      this.counters.dropped += names.length;
    })();
    return this.distrusting;
  }

  /** True once distrust was called. */
  get distrusted(): boolean {
    return this.distrusting !== undefined;
  }

  private fileName(identityDigest: Uint8Array): string {
    return `${this.fileTag}.${Buffer.from(identityDigest).toString('hex')}.bin`;
  }

  /** Resolves when every background write started so far has finished (never rejects). */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
  }
}
