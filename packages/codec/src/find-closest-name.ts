/**
 * The name in `known` that a misspelt `name` most likely meant: the same letters in another case,
 * else the nearest at most MAX_SUGGESTION_EDITS edits away (the first such in `known` on a tie),
 * else undefined. Option names are short, so a wider net suggests names nobody meant. Shared by
 * every @splitzip package that refuses unknown option keys, so they all suggest alike.
 */
export function findClosestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = MAX_SUGGESTION_EDITS + 1;
  for (const candidate of known) {
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

/** Levenshtein distance of `a` and `b`, or `limit` once it is certain to reach it. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) >= limit) return limit;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const value = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      row.push(value);
      if (value < rowMin) rowMin = value;
    }
    if (rowMin >= limit) return limit;
    previous = row;
  }
  return Math.min(previous[b.length]!, limit);
}
