import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';

/** Hugging Face shard naming: `<prefix>-NNNNN-of-MMMMM.safetensors`. */
const NUMBERED_SHARD = /^(.+)-(\d+)-of-(\d+)\.safetensors$/;

/** The prefix of a numbered shard's name (`model` of `model-00001-of-00003.safetensors`), or undefined for another name. */
export function numberedShardPrefix(name: string): string | undefined {
  return NUMBERED_SHARD.exec(name)?.[1];
}

/**
 * Rule 20b, for a directory (or source) without index: its numbered shards must form complete
 * sets, every NNNNN from 1 to MMMMM and one MMMMM per prefix. A sharded write replaced, aborted or
 * killed midway leaves an incomplete or mixed set, which read as a model silently lost or mixed
 * tensors. Throws SHARD_SET_INCOMPLETE naming the missing or odd file. Pure: names only.
 */
export function checkShardNumbering(names: readonly string[], file: string): void {
  const sets = new Map<string, { count: number; countText: string; first: string; numbers: Set<number>; width: number }>();
  for (const name of names) {
    const match = NUMBERED_SHARD.exec(name);
    if (!match) continue;
    const [, prefix, numberText, countText] = match as unknown as [string, string, string, string];
    const number = Number(numberText);
    const count = Number(countText);
    const set = sets.get(prefix);
    if (set !== undefined && set.count !== count) {
      throw new SafetensorsError('SHARD_SET_INCOMPLETE', `shard ${quoteValue(name)} belongs to a set of ${count}, ${quoteValue(set.first)} to a set of ${set.count}: a mix of two models`, { file });
    }
    if (!Number.isSafeInteger(count) || number < 1 || number > count) {
      throw new SafetensorsError('SHARD_SET_INCOMPLETE', `shard ${quoteValue(name)} is numbered outside 1..${countText}`, { file });
    }
    if (set === undefined) sets.set(prefix, { count, countText, first: name, numbers: new Set([number]), width: numberText.length });
    else set.numbers.add(number);
  }
  for (const [prefix, set] of sets) {
    // Stops at the first gap: at most names.length + 1 steps, whatever MMMMM claims.
    for (let number = 1; number <= set.count; number += 1) {
      if (!set.numbers.has(number)) {
        const missing = `${prefix}-${String(number).padStart(set.width, '0')}-of-${set.countText}.safetensors`;
        throw new SafetensorsError('SHARD_SET_INCOMPLETE', `shard ${quoteValue(missing)} is missing (the set of ${quoteValue(set.first)} is incomplete)`, { file });
      }
    }
  }
}
