// findClosestName against a plain reference: the whole edit-distance matrix per candidate, the
// nearest within MAX_SUGGESTION_EDITS, ties to the first, a case-only difference first of all.
// The banded implementation must pick the same name for every input.
import { describe, expect, it } from 'vitest';
import { findClosestName, MAX_SUGGESTION_EDITS } from '../src/internal.js';
import { createRandom } from './reference.js';

function levenshtein(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      rows[i]![j] = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return rows[a.length]![b.length]!;
}

function referenceClosest(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = MAX_SUGGESTION_EDITS + 1;
  for (const candidate of known) {
    const distance = levenshtein(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

describe('findClosestName', () => {
  it('picks what the full-matrix reference picks, on random names of a small alphabet', () => {
    const rng = createRandom(7);
    const word = (length: number) => Array.from({ length }, () => 'abcAB._'[Math.floor(rng() * 7)]).join('');
    for (let round = 0; round < 3000; round++) {
      const name = word(Math.floor(rng() * 9));
      // Candidates near the name (edits of it) and far ones, in random order.
      const known = Array.from({ length: 1 + Math.floor(rng() * 8) }, () => {
        if (rng() < 0.5) return word(Math.floor(rng() * 11));
        const letters = [...name];
        for (let edits = Math.floor(rng() * 4); edits > 0; edits--) {
          const at = Math.floor(rng() * (letters.length + 1));
          const kind = Math.floor(rng() * 3);
          if (kind === 0) letters.splice(at, 0, word(1));
          else if (kind === 1) letters.splice(at, 1);
          else letters[at] = word(1);
        }
        return letters.join('');
      });
      expect(findClosestName(name, known), `${JSON.stringify(name)} in ${JSON.stringify(known)}`).toBe(referenceClosest(name, known));
    }
  });

  it('suggests a tensor name among long shared prefixes, and nothing past two edits', () => {
    const known = Array.from({ length: 200 }, (_, i) => `model.layers.${i}.self_attn.q_proj.weight`);
    expect(findClosestName('model.layers.17.self_atn.q_proj.weight', known)).toBe('model.layers.17.self_attn.q_proj.weight');
    expect(findClosestName('MODEL.LAYERS.3.SELF_ATTN.Q_PROJ.WEIGHT', known)).toBe('model.layers.3.self_attn.q_proj.weight');
    expect(findClosestName('model.layers.17.mlp.up_proj.weight', known)).toBeUndefined();
    expect(findClosestName('', ['a', 'bcd'])).toBe('a');
    expect(findClosestName('x', [])).toBeUndefined();
  });
});
