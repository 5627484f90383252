// The words in a shared arena that keep two threads out of one share's scratch area at once. They
// live in the owner's scratch area, in bytes the kernels never touch (codec.wat's memory map,
// 2048..4095): a counter that numbers attachments, then for share i three i32 words (16 bytes):
//   lock: 0 when free, else the token of the attachment inside a kernel call on it;
//   generation: bumped by the owner's arena.share(i), which retires earlier attachments of share i;
//   last: the token of the attachment that used the scratch area last (its cached tables are there).
// A busy word and not a claim at attach: a thread that dies cannot release anything, and the
// owner's share(i) for its replacement (after it exited) frees what it held.
import { SplitZipError } from './errors.js';

const SHARE_WORDS_AT = 2048;
const COUNTER_WORD = SHARE_WORDS_AT / 4;
const wordsOf = (index: number) => COUNTER_WORD + 4 * (index + 1);

/**
 * The owner hands share `index` out afresh (arena.share): attachments made from earlier shares of
 * it are retired, and a lock a thread killed inside a kernel call left held is freed. Returns the
 * new generation, which the share carries. Only for a share whose previous thread has exited.
 */
export function renewShare(words: Int32Array, index: number): number {
  const at = wordsOf(index);
  const generation = Atomics.add(words, at + 1, 1) + 1;
  Atomics.store(words, at, 0);
  return generation;
}

/** The guard of one attachment's kernel calls; `enter` returns true when another attachment used the scratch area since this one last did. */
export interface ShareLock {
  enter(): boolean;
  leave(): void;
}

function inUse(index: number): SplitZipError {
  return new SplitZipError('INVALID_ARGUMENT', `share ${index} of this arena is in use by another thread: attach each share in one thread only`, {
    share: index,
  });
}

function retired(index: number): SplitZipError {
  return new SplitZipError(
    'INVALID_ARGUMENT',
    `share ${index} of this arena was handed out again (arena.share(${index})) to another thread: attach each share in one thread only`,
    { share: index },
  );
}

/**
 * A lock on share `index`'s scratch area for an attachment made from a share of `generation` (0
 * for a share without one: its owner never renews). Calls nest (a kernel's callback may call
 * again in this thread); only the outermost takes and frees the word. Two threads inside calls on
 * one share at once: the second's call throws before it writes anything. An attachment retired by
 * share(index) throws from its next call, and from a call under way when it was retired (its
 * result is not returned).
 */
export function createShareLock(words: Int32Array, index: number, generation: number): ShareLock {
  const at = wordsOf(index);
  let token = 0;
  while (token === 0) token = Atomics.add(words, COUNTER_WORD, 1) + 1;
  let depth = 0;
  return {
    enter(): boolean {
      if (depth > 0) {
        depth++;
        return false;
      }
      if (Atomics.load(words, at + 1) !== generation) throw retired(index);
      if (Atomics.compareExchange(words, at, 0, token) !== 0) throw inUse(index);
      // Renewed between the two reads: that share's thread may be about to take it.
      if (Atomics.load(words, at + 1) !== generation) {
        Atomics.compareExchange(words, at, token, 0);
        throw retired(index);
      }
      depth = 1;
      if (Atomics.load(words, at + 2) === token) return false;
      Atomics.store(words, at + 2, token);
      return true;
    },
    leave(): void {
      if (--depth > 0) return;
      // Freed by share(index) meanwhile: another thread may have run in this scratch area too.
      if (Atomics.compareExchange(words, at, token, 0) !== token) throw retired(index);
    },
  };
}
