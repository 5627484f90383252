import type { SliceBinding } from './types.js';

/**
 * Whether a slice binding was verified against other files than the one a reader holds
 * (`fileStamp`, its SafetensorsShard.stamp): none of the binding's stamps is the file's. A binding
 * without stamps, or a file without one, is not stale: trusted, as before stamps existed.
 */
export function isBindingStale(binding: SliceBinding, fileStamp: string | null): boolean {
  return binding.stamps.length > 0 && fileStamp !== null && !binding.stamps.includes(fileStamp);
}
