import { realpath } from 'node:fs/promises';
import { dirname, join, sep } from 'node:path';
import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';
import { rethrowIo } from './rethrow-io.js';

/**
 * Before a sharded writer (or resumeShardedModelWrite) removes the old model's files: each one's
 * directory must resolve (links followed) inside the model directory's real path, as rule 19
 * requires of a shard the reader opens. An old index may name `sub/x.safetensors`; were `sub` a link
 * to a directory elsewhere, unlinking that name deleted a file outside the model directory. The
 * file itself may be a link (a hub snapshot's): unlink removes the link, never its target. A name
 * whose directory is gone has nothing to remove. Throws INDEX_SHARD_OUTSIDE naming the first such
 * file (`source`: the old index or the commit record that names it); checks only, removes nothing.
 */
export async function checkRemovalsInside(root: string, names: readonly string[], source: string): Promise<void> {
  const nested = names.filter((name) => name.includes('/'));
  if (nested.length === 0) return;
  const rootReal = await realpath(root).catch((cause: unknown) => rethrowIo(cause, root));
  for (const name of nested) {
    const parent = dirname(join(root, name));
    let parentReal: string;
    try {
      parentReal = await realpath(parent);
    } catch (cause) {
      const code = (cause as NodeJS.ErrnoException)?.code;
      // Nothing there to remove (or nothing a removal could reach: a link loop fails unlink too).
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') continue;
      return rethrowIo(cause, parent);
    }
    if (parentReal !== rootReal && !parentReal.startsWith(rootReal + sep)) {
      throw new SafetensorsError(
        'INDEX_SHARD_OUTSIDE',
        `old shard ${quoteValue(name)}, which this write would remove, lies in ${parentReal}, outside the model directory ${rootReal} (a linked directory on its path): nothing was removed; remove that link (or the old file's entry) first, or write into another directory`,
        { file: source, shard: name },
      );
    }
  }
}
