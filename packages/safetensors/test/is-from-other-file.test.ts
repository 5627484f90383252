// The rule build, verify --model and the runtime's stale remedy share: a binding recorded only with
// other files (other inodes) of its shard name.
import { describe, expect, it } from 'vitest';
import { isFromOtherFile } from '../src/index.js';

const stamp = (inode: number) => `100:5:6:${inode}`;

describe('isFromOtherFile', () => {
  it('is true only when every recorded stamp names another inode than the shard now', () => {
    expect(isFromOtherFile([stamp(2)], stamp(1))).toBe(true);
    expect(isFromOtherFile([stamp(2), stamp(3)], stamp(1))).toBe(true);
    // One of them this file (rewritten in place): not from another file.
    expect(isFromOtherFile([stamp(2), stamp(1)], stamp(1))).toBe(false);
    expect(isFromOtherFile([stamp(1)], stamp(1))).toBe(false);
  });

  it('is false where it cannot say: no stamps, legacy or object stamps, a shard with no file stamp', () => {
    expect(isFromOtherFile([], stamp(1))).toBe(false);
    expect(isFromOtherFile(['100:5'], stamp(1))).toBe(false);
    expect(isFromOtherFile([stamp(2), 'etag:"abc"'], stamp(1))).toBe(false);
    expect(isFromOtherFile([stamp(2)], null)).toBe(false);
    expect(isFromOtherFile([stamp(2)], '100:5')).toBe(false);
  });
});
