import { numberedShardPrefix } from './check-shard-numbering.js';
import { quoteValue } from './quote-value.js';

/** How many names a message lists before "and N more". */
export const MAX_LISTED_NAMES = 8;

/** `*.safetensors.index.json`, and the variant indexes of diffusers (`*.safetensors.index.fp16.json`). */
const ANY_INDEX = /\.safetensors\.index(\.[^./]+)?\.json$/;

/** Whether a file name is a model file: a `.safetensors` file or an index (variant indexes included). */
export function isModelFileName(name: string): boolean {
  return name.endsWith('.safetensors') || ANY_INDEX.test(name);
}

/** `a, b, c and 5 more` (each quoted), at most MAX_LISTED_NAMES of them. */
export function listNames(names: readonly string[]): string {
  const shown = names.slice(0, MAX_LISTED_NAMES).map((name) => quoteValue(name));
  const more = names.length - shown.length;
  return more > 0 ? `${shown.join(', ')} and ${more} more` : shown.join(', ');
}

/**
 * For NOT_SAFETENSORS of a directory (or source) without any model file of its own: a diffusers
 * pipeline root (`model_index.json`, one model per component subdirectory) or a folder of models.
 * `subdirectories` are those (one level down) that hold a model file. Empty when there is nothing to say.
 */
export function describeSubdirectoryModels(subdirectories: readonly string[], hasPipelineIndex: boolean): string {
  const pipeline = hasPipelineIndex ? ': it holds model_index.json, a pipeline of several models (diffusers)' : '';
  if (subdirectories.length === 0) return pipeline;
  const which = listNames([...subdirectories].sort().map((name) => `${name}/`));
  return `${pipeline}; its subdirectories ${which} hold models: open (or build) each one by its own path`;
}

/**
 * For DUPLICATE_TENSOR_NAME of a directory without a plain index: the models it holds side by side
 * (diffusers variants: `x.safetensors` beside `x.fp16.safetensors`, a `x.bf16-NNNNN-of-MMMMM` set
 * with its `x.safetensors.index.bf16.json`), each of which opens alone by its path. Undefined where
 * there are fewer than two. A numbered set is named by its index where the directory has one.
 */
export function describeCandidateModels(names: readonly string[]): string | undefined {
  const indexes = names.filter((name) => ANY_INDEX.test(name));
  const lone = names.filter((name) => name.endsWith('.safetensors') && numberedShardPrefix(name) === undefined);
  // Without any index, a numbered set has nothing to open it by alone: named by its pattern.
  const sets =
    indexes.length > 0
      ? []
      : [...new Set(names.map((name) => numberedShardPrefix(name)).filter((prefix) => prefix !== undefined))].map((prefix) => `${prefix}-NNNNN-of-MMMMM.safetensors`);
  const candidates = [...indexes, ...lone].sort();
  if (candidates.length + sets.length < 2) return undefined;
  const setsNote = sets.length > 0 ? `${candidates.length > 0 ? '; and ' : ''}the numbered set${sets.length > 1 ? 's' : ''} ${listNames(sets)} (no index: move a set into a directory of its own)` : '';
  const openable = candidates.length > 0 ? `${listNames(candidates)}: pass one of these files as the path (an index opens its shards)` : '';
  return `; the directory holds several models side by side (variants such as fp16, or copies: not one model): ${openable}${setsNote}`;
}
