// Hermetic checks of an s3:// model's location and opening: a mistyped `S3://` model gets the
// lower-case hint (it was told "<model> is read from local files"), and a shard object replaced
// between the LIST and its header's read is MODEL_CHANGED, as during the tensors' reads (it was the
// store's raw OBJECT_CHANGED). The object source is a stand-in: no gateway needed.
import type * as store from '@splitzip/store';
import { StoreError } from '@splitzip/store';
import { expect, it, vi } from 'vitest';
import { checkLocalModel } from '../src/check-local-model.js';
import { isBuilderError } from '../src/index.js';
import { openBuilderModel } from '../src/open-builder-model.js';

vi.mock('@splitzip/store', async (importOriginal) => {
  const actual = await importOriginal<typeof store>();
  return {
    ...actual,
    // One shard listed; its header read refused as S3 refuses an If-Match GET of a replaced object.
    openS3ObjectSource: (url: string) => ({
      url,
      list: async () => ['model.safetensors'],
      open: async (name: string) => ({
        sizeBytes: 1024,
        etag: '"listed"',
        readInto: async () => {
          throw new actual.StoreError('OBJECT_CHANGED', `${url}${name} changed since it was opened (If-Match refused)`, { path: `${url}${name}` });
        },
      }),
      close: async () => {},
    }),
  };
});

it('S3:// (upper case) as the model of a command that reads s3:// models: the lower-case hint, not "read from local files"', () => {
  let caught: unknown;
  try {
    checkLocalModel('S3://models/llama/rev-a/', 'build', '<model>', true);
  } catch (error) {
    caught = error;
  }
  expect(isBuilderError(caught, 'USAGE')).toBe(true);
  expect((caught as Error).message).toContain('lower case');
  expect((caught as Error).message).not.toContain('read from local files');
});

it.each(['build', 'verify', 'stats'] as const)('a shard replaced before its header is read (%s): MODEL_CHANGED naming the model', async (verb) => {
  const opened = openBuilderModel('s3://models/llama/rev-a/', { verb });
  await expect(opened).rejects.toSatisfy((error: unknown) => isBuilderError(error, 'MODEL_CHANGED'));
  await expect(opened).rejects.toThrow(/the model changed while being read: s3:\/\/models\/llama\/rev-a\/model\.safetensors was replaced/);
  await expect(opened).rejects.not.toBeInstanceOf(StoreError);
});
