// A store SLICE_CONFLICT reaching the build through a commit batch: on an s3:// cache one store call
// carries many tensors, and the batcher fails each of them with the one store error. The message
// must name the tensor whose slice conflicted (the error's details.slice), keep what the store said,
// and not advise --rebind to a build that passed it.
import { StoreError, type AddEntryInput, type CacheStore } from '@splitzip/store';
import { describe, expect, it } from 'vitest';
import { createCommitBatcher } from '../src/create-commit-batcher.js';
import { BuilderError } from '../src/errors.js';
import { wrapBuildError } from '../src/wrap-build-error.js';

const SHARD = 'model-00001-of-00002.safetensors';
const TENSORS = [
  { name: 'layer0.t0.weight', key: 'a'.repeat(40), slice: [SHARD, 0, 608] as const },
  { name: 'layer0.t1.weight', key: 'b'.repeat(40), slice: [SHARD, 608, 2000] as const },
];
const tensorOfSlice = (shardName: string, offsetBytes: number, sizeBytes: number) => {
  const tensor = TENSORS.find((t) => t.slice[0] === shardName && t.slice[1] === offsetBytes && t.slice[2] === sizeBytes);
  return tensor && { name: tensor.name, file: `/models/B/${shardName}` };
};

/** What the s3:// store throws when t1's alias lost a race to another writer's key. */
function storeConflict(): StoreError {
  const t1 = TENSORS[1]!;
  return new StoreError('SLICE_CONFLICT', `slice ${JSON.stringify(t1.slice)} was bound concurrently: it resolves to ${'c'.repeat(40)}, not ${t1.key}`, {
    entry: t1.key,
    details: { slice: [...t1.slice], owner: 'c'.repeat(40), requestedKey: t1.key },
  });
}

describe('SLICE_CONFLICT from a commit batch', () => {
  it('names the tensor whose slice conflicted, keeps the store message, and gives no --rebind advice with --rebind', async () => {
    const store = {
      addEntries: async (inputs: readonly AddEntryInput[]) => {
        expect(inputs.map((i) => i.qualname)).toEqual(TENSORS.map((t) => t.name));
        throw storeConflict();
      },
    } as unknown as CacheStore;
    const commits = createCommitBatcher(store, { rebind: true, batch: true });
    // Both tensors join one batch: both are failed with the one store error.
    const failures = await Promise.all(
      TENSORS.map((t) =>
        commits
          .addEntry({ key: t.key, qualname: t.name, payload: new Uint8Array(0), shape: [1], dtype: 'BF16', sliceKeys: [[...t.slice]], leaveTakenSlices: true })
          .then(
            () => undefined,
            (error: unknown) => wrapBuildError(error, { tensor: t.name, file: `/models/B/${SHARD}`, rebind: true, tensorOfSlice }),
          ),
      ),
    );
    for (const failure of failures) {
      expect(failure).toBeInstanceOf(BuilderError);
      const error = failure as BuilderError;
      expect(error.code).toBe('SLICE_CONFLICT');
      // t0 surfaced it too, but it is t1's slice that conflicted.
      expect(error.context.tensor).toBe('layer0.t1.weight');
      expect(error.message).toContain('tensor layer0.t1.weight');
      expect(error.message).not.toContain('layer0.t0.weight');
      expect(error.message).toContain('was bound concurrently');
      expect(error.message).not.toContain('--rebind');
      expect((error.cause as StoreError).code).toBe('SLICE_CONFLICT');
    }
  });

  it('without --rebind the advice stays, still naming the conflicting tensor; an error without a slice names the tensor in hand', () => {
    // A directory cache binds a slice once per file (0.56): only this file's own binding from before
    // it changed in place, or one without a file stamp, is in the way there.
    const error = wrapBuildError(storeConflict(), { tensor: 'layer0.t0.weight', file: 'x', cacheDir: '/caches/c', rebind: false, tensorOfSlice }) as BuilderError;
    expect(error).toMatchObject({ code: 'SLICE_CONFLICT', context: { tensor: 'layer0.t1.weight' } });
    expect(error.message).toContain('was bound concurrently');
    expect(error.message).toContain(
      "recorded with a file stamp of this file's inode number (this very file before it changed in place, or another file with the same inode number on another file system), with an object's stamp, or with no file stamp",
    );
    expect(error.message).toContain('pass --rebind, which moves the slice to this tensor, or removes the binding where the build serves the tensor raw');
    expect(error.message).toContain('Other files of this shard name (other revisions, fine-tunes) are no conflict');
    expect(error.message).not.toContain('one cache binds a slice to one');
    // An s3:// cache binds a slice to one entry: both readings, each with its way out.
    const s3 = wrapBuildError(storeConflict(), { tensor: 'layer0.t0.weight', file: 'x', cacheDir: 's3://bucket/cache', rebind: false, tensorOfSlice }) as BuilderError;
    expect(s3.message).toContain('an s3:// cache binds a slice to one entry');
    expect(s3.message).toContain('text_encoder/ and text_encoder_2/');
    expect(s3.message).toContain('give it a cache of its own, build both into a directory cache, which binds each file apart, or build both from s3:// copies');
    // Said only of a local model's files: an s3:// model's revisions are bound side by side (since 0.57).
    expect(s3.message).toContain("binds a slice to one entry where a local model's files are concerned (it records no file stamps; an s3:// model's revisions, told apart by their objects' ETags, are bound side by side)");
    expect(s3.message).toContain('a replaced shard: pass --rebind, which moves the slice to this tensor, or removes the binding where the build serves the tensor raw');
    const plain = new StoreError('SLICE_CONFLICT', 'slice bound elsewhere');
    expect((wrapBuildError(plain, { tensor: 'layer0.t0.weight', rebind: false, tensorOfSlice }) as BuilderError).context.tensor).toBe('layer0.t0.weight');
  });

  it('with --rebind, a refusal by a rule of the store (details.reason) blames no other writer and says a rerun will not help', () => {
    const t1 = TENSORS[1]!;
    const ruled = new StoreError('SLICE_CONFLICT', `slice ${JSON.stringify(t1.slice)} is bound to ${'c'.repeat(40)}; refusing to bind it to ${t1.key}: a binding beside another must hold a file stamp (unbindSlices)`, {
      entry: t1.key,
      details: { slice: [...t1.slice], boundKey: 'c'.repeat(40), requestedKey: t1.key, reason: 'binding-without-file-stamp' },
    });
    const error = wrapBuildError(ruled, { tensor: 'layer0.t0.weight', file: 'x', cacheDir: '/caches/c', rebind: true, tensorOfSlice }) as BuilderError;
    expect(error).toMatchObject({ code: 'SLICE_CONFLICT', context: { tensor: 'layer0.t1.weight' } });
    expect(error.message).toContain('would break a rule of the store (binding-without-file-stamp)');
    expect(error.message).toContain('No other writer did this, and running the build again gives the same refusal');
    expect(error.message).not.toContain('another writer');
    expect(error.message).not.toContain('run the build again once');
    // A race (no rule named) still reads as another writer's.
    expect((wrapBuildError(storeConflict(), { tensor: 'layer0.t0.weight', file: 'x', cacheDir: '/caches/c', rebind: true, tensorOfSlice }) as BuilderError).message).toContain('by another writer at the same time');
  });
});
