import { classifyBinding } from './classify-binding.js';
import type { SliceBinding } from './types.js';

/**
 * Whether a slice binding was verified against other files than the one a reader holds
 * (`fileStamp`, its SafetensorsShard.stamp): classifyBinding says 'stale'. Only a file stamp can
 * make a binding stale (an object stamp not recorded is 'unchecked'), and only against the
 * binding's file stamps: a binding without any, or a reader without a stamp, is not stale.
 */
export function isBindingStale(binding: SliceBinding, fileStamp: string | null): boolean {
  return classifyBinding(binding, fileStamp) === 'stale';
}
