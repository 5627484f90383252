// Looking for journals (findNewerJournal at every compaction, the manifest recovery) reads the
// cache's root only: listing blobs/ too read every blob name (a million on a large cache) each time.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { FsBackend } from '../src/fs-backend.js';
import { catchError, makeTempDir, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

it('listFiles with rootOnly does not read blobs/ at all', async () => {
  const root = await makeTempDir();
  await writeFile(join(root, 'journal.2'), 'x');
  // blobs/ that cannot be listed (a file in its place): only a listing that reads it fails.
  await writeFile(join(root, 'blobs'), 'not a directory');
  const backend = new FsBackend(root);
  expect((await catchError(() => backend.listFiles((name) => name.startsWith('journal.')))).code).toBe('IO_ERROR');
  expect((await backend.listFiles((name) => name.startsWith('journal.'), { rootOnly: true })).map((f) => f.name)).toEqual(['journal.2']);
});
