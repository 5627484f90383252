/**
 * One copy of each distinct shard name and stamp list read by one parse (parseManifest): every
 * binding repeats its shard's name and stamps, so a manifest of 64,000 entries held as many copies
 * of a few dozen strings (about 8 % of an open store's heap). Entries are frozen, so sharing is safe.
 */
export class StringPool {
  private readonly strings = new Map<string, string>();
  private readonly stampLists = new Map<string, readonly string[]>();

  /** The pool's copy of `value` (`value` itself the first time it is seen). */
  intern(value: string): string {
    const pooled = this.strings.get(value);
    if (pooled !== undefined) return pooled;
    this.strings.set(value, value);
    return value;
  }

  /** A frozen copy of validated stamps (no NUL in them, so NUL joins them unambiguously), shared by equal lists. */
  internStamps(stamps: readonly string[]): readonly string[] {
    const id = stamps.join('\0');
    let pooled = this.stampLists.get(id);
    if (pooled === undefined) {
      pooled = Object.freeze(stamps.map((stamp) => this.intern(stamp)));
      this.stampLists.set(id, pooled);
    }
    return pooled;
  }
}
