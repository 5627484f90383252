import type { Codebook, CodebookJson } from '@splitzip/codec';

/**
 * One copy of each distinct shard name, stamp list and codebook read by one parse (parseManifest):
 * every binding repeats its shard's name and stamps, so a manifest of 64,000 entries held as many
 * copies of a few dozen strings (about 8 % of an open store's heap); tensors of one kind often get
 * the same codebook. Entries are frozen, so sharing is safe.
 */
export class StringPool {
  private readonly strings = new Map<string, string>();
  private readonly stampLists = new Map<string, readonly string[]>();
  private readonly codebooks = new Map<string, CodebookJson>();

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

  /** The first codebook seen with `codebook`'s exponents (a validated, frozen one: codebookFromJson's). */
  internCodebook(codebook: Codebook): CodebookJson {
    // Exponents are integers in 0..255 (createCodebook): one character each (a join took ~1 µs).
    const id = String.fromCharCode(...codebook.exponents);
    let pooled = this.codebooks.get(id);
    if (pooled === undefined) {
      pooled = codebook as CodebookJson;
      this.codebooks.set(id, pooled);
    }
    return pooled;
  }
}
