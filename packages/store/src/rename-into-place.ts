import { randomBytes } from 'node:crypto';
import { rename } from 'node:fs/promises';
import { errnoCode } from './errors.js';

/**
 * Renames the finished file `from` to `to` (replacing a file, or a planted link itself, never its
 * target). A directory in `to`'s place, which rename cannot replace, is moved aside whole to
 * `<to>.displaced-<ms>-<token>` first, never deleted (not ours; gc lists it as unknown): a
 * local cache's blob (verify says --repair puts it back) or a read-through copy (fetched anew on
 * every load otherwise).
 */
export async function renameIntoPlace(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (error) {
    if (errnoCode(error) !== 'EISDIR') throw error;
    await rename(to, `${to}.displaced-${Date.now()}-${randomBytes(4).toString('hex')}`);
    await rename(from, to);
  }
}
