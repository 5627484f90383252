// How a format-2 S3 cache's listing reads as bindings (deriveS3SliceBindings, FILE-BINDINGS.md
// "Phase 2: s3://"): pure, no gateway; the rules the Ceph suite (s3-file-bindings) cannot force.
import { expect, it } from 'vitest';
import { MAX_SLICE_BINDINGS } from '../src/limits.js';
import { sliceObjectName, stampObjectName } from '../src/s3-layout.js';
import { deriveS3SliceBindings, perFileBoundKeys } from '../src/s3-slice-binding-set.js';
import { sliceId } from '../src/validate-entry.js';

const SLICE = ['model.safetensors', 0, 480] as const;
const ID = sliceId(...SLICE);
const key = (n: number): string => n.toString(16).padStart(40, '0');
const etag = (n: number): string => `etag:"${String(n).padStart(32, '0')}"`;
const alias = (epoch: number, k: number) => ({ name: sliceObjectName(SLICE, epoch, key(k)), lastModifiedMs: 1000 });
const stamp = (k: number, s: number, at = 1000) => ({ name: stampObjectName(SLICE, key(k), etag(s), ''), lastModifiedMs: at });
const all = () => true;

it('the top key first with every stamp of its key, then keys below by epoch holding stamps; a key below without a stamp binds nothing', () => {
  const set = deriveS3SliceBindings([alias(0, 1), alias(1, 2), alias(2, 3), alias(3, 4)], [stamp(1, 1), stamp(3, 3), stamp(3, 4, 2000)], all).get(ID)!;
  expect(set.bindings).toEqual([
    { key: key(4), epoch: 3, stamps: [] },
    { key: key(3), epoch: 2, stamps: [etag(3), etag(4)] },
    { key: key(1), epoch: 0, stamps: [etag(1)] },
  ]);
  expect(set.conflictKeys).toBeUndefined();
});

it('a stamp goes to the highest binding holding it; two keys of one epoch holding it: neither', () => {
  // key 2 (top) and key 1 both hold stamp 1: key 1 is left without one. Keys 3 and 5 at epoch 0 share stamp 7.
  const set = deriveS3SliceBindings([alias(0, 3), alias(0, 5), alias(1, 1), alias(2, 2)], [stamp(2, 1), stamp(1, 1), stamp(3, 7), stamp(5, 7), stamp(5, 8)], all).get(ID)!;
  expect(set.bindings.map((b) => [b.key, b.stamps])).toEqual([
    [key(2), [etag(1)]],
    [key(5), [etag(8)]],
  ]);
});

it('a conflict at the top: no latest binding, its keys\' stamps given to no one, the keys below still bound; every key counts as bound', () => {
  const aliases = [alias(0, 1), alias(1, 2), alias(1, 3)];
  const stamps = [stamp(1, 1), stamp(2, 2), stamp(3, 1)];
  const set = deriveS3SliceBindings(aliases, stamps, all).get(ID)!;
  expect(set.conflictKeys).toEqual([key(2), key(3)]);
  expect(set.bindings).toEqual([]); // key 1's only stamp is the conflict key 3's too
  expect(perFileBoundKeys(aliases, stamps)).toEqual(new Set([key(2), key(3)]));
  const other = deriveS3SliceBindings(aliases, [stamp(1, 9), stamp(2, 2)], all).get(ID)!;
  expect(other.bindings).toEqual([{ key: key(1), epoch: 0, stamps: [etag(9)] }]);
});

it(`past MAX_SLICE_BINDINGS (${MAX_SLICE_BINDINGS}) the lowest epochs are evicted; a key its entry refuses binds nothing and is not counted`, () => {
  const n = MAX_SLICE_BINDINGS + 2;
  const aliases = Array.from({ length: n }, (_, i) => alias(i, i + 1));
  const stamps = Array.from({ length: n }, (_, i) => stamp(i + 1, i + 1));
  const set = deriveS3SliceBindings(aliases, stamps, (k) => k !== key(n - 1)).get(ID)!;
  expect(set.bindings.map((b) => b.key)).toEqual([n, n - 2, n - 3, n - 4, n - 5, n - 6, n - 7, n - 8].map(key));
  expect(set.evicted.map((b) => b.key)).toEqual([key(1)]);
});
