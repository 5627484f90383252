/**
 * The name in `known` that a misspelt `name` most likely meant: the same letters in another case,
 * else the nearest at most MAX_SUGGESTION_EDITS edits away (the first such in `known` on a tie),
 * else undefined. A copy of @splitzip/codec's findClosestName (this package depends on no other
 * @splitzip package), so that its option and dtype suggestions read as the codec's and kernels' do.
 */
export function findClosestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = MAX_SUGGESTION_EDITS + 1;
  for (const candidate of known) {
    // A length this far off cannot beat the best so far (nor be the same letters in another case).
    if (Math.abs(candidate.length - name.length) >= bestDistance) continue;
    const other = candidate.toLowerCase();
    const distance = other === lower ? 0 : editDistance(lower, other, bestDistance);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Edits (insertions, deletions, substitutions) a suggestion may be from the name given. */
export const MAX_SUGGESTION_EDITS = 2;

// Two rows of the edit-distance matrix, reused by every call (grown to the longest name seen).
let rowA = new Int32Array(64);
let rowB = new Int32Array(64);

/**
 * Levenshtein distance of `a` and `b` (UTF-16 units), or `limit` once it is certain to reach it.
 * Only the band |i - j| < limit of the matrix is computed: a cell outside it is at least `limit`.
 */
function editDistance(a: string, b: string, limit: number): number {
  const aLength = a.length;
  const bLength = b.length;
  if (Math.abs(aLength - bLength) >= limit) return limit;
  if (rowA.length <= bLength) {
    rowA = new Int32Array(bLength + 1);
    rowB = new Int32Array(bLength + 1);
  }
  let previous = rowA;
  let current = rowB;
  for (let j = 0; j <= bLength; j++) previous[j] = j < limit ? j : limit;
  const band = limit - 1;
  for (let i = 1; i <= aLength; i++) {
    const from = Math.max(1, i - band);
    const to = Math.min(bLength, i + band);
    // The cell left of the band: column 0 (i deletions) or outside the band (at least limit).
    current[from - 1] = from === 1 ? Math.min(i, limit) : limit;
    let rowMin = current[from - 1]!;
    const code = a.charCodeAt(i - 1);
    for (let j = from; j <= to; j++) {
      let value = previous[j - 1]! + (code === b.charCodeAt(j - 1) ? 0 : 1);
      const deletion = previous[j]! + 1;
      if (deletion < value) value = deletion;
      const insertion = current[j - 1]! + 1;
      if (insertion < value) value = insertion;
      if (value > limit) value = limit;
      current[j] = value;
      if (value < rowMin) rowMin = value;
    }
    // The cell right of the band, read by the next row as its `previous[j]`: at least limit.
    if (to < bLength) current[to + 1] = limit;
    if (rowMin >= limit) return limit;
    const swap = previous;
    previous = current;
    current = swap;
  }
  return Math.min(previous[bLength]!, limit);
}
