// The remedy a stale tensor's detail names for a binding recorded only with other files of its
// shard name. A local cache (one binding per file): a build binds the tensors it caches beside, and
// one it skips stays stale while the other file's binding holds the slice. s3:// (one binding per
// slice): `build --rebind` alone removes that binding (--rebind-other-files has had no effect since 0.56).
import { expect, it } from 'vitest';
import { staleBindingRemedy, STALE_REMEDY } from '../src/stale-binding-remedy.js';

/** `<size>:<mtime ns>:<ctime ns>:<inode>`: another file (inode 5) than the shard now (inode 6). */
const RECORDED = ['8192:1000:1000:5'];
const CURRENT = '8192:2000:2000:6';

it('a local cache: a skipped tensor stays stale while another file\'s binding holds its slice; a cache of its own avoids it', () => {
  const remedy = staleBindingRemedy(RECORDED, CURRENT, false);
  expect(remedy).toMatch(/^a build of this model binds this file's tensors beside the other files' bindings \(/);
  expect(remedy).toMatch(/a tensor that build skips, for its coverage or no gain, is not bound: it stays `stale`, read raw and hashed once per process, while another file's binding holds its slice, which a cache of its own for this model avoids\)$/);
});

it('s3://: build --rebind alone removes the other file\'s binding of a skipped tensor; no --rebind-other-files', () => {
  const remedy = staleBindingRemedy(RECORDED, CURRENT, true);
  expect(remedy).not.toMatch(/rebind-other-files/);
  expect(remedy).toMatch(/a build of this model with --rebind binds it where that build caches the tensor, and removes that binding where it skips it/);
  // This file's own binding (same inode) is the plain --rebind remedy on either.
  expect(staleBindingRemedy(['8192:1000:1000:6'], CURRENT, true)).toBe(STALE_REMEDY);
});
