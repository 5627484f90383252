// The Hugging Face hub cache's own files met by openSafetensorsModel: its codes are unchanged, its
// messages say what the path is (a link to a blob still downloading, a loop, the repository, a ref).
import { mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openSafetensorsModel, writeSafetensorsFile, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, makeFifo, settlesWithin, unblockFifos, withTempDir } from './helpers.js';

const tensors: TensorToWrite[] = [{ name: 'a', dtype: 'BF16', shape: [4], data: new Uint8Array(8).fill(1) }];
const REVISION = 'c3'.repeat(20);
const BLOB = 'ab'.repeat(32);

/** models--org--name with one snapshot linking model.safetensors to its blob; returns the repo and snapshot. */
async function makeRepo(dir: string): Promise<{ repo: string; snapshot: string }> {
  const repo = join(dir, 'models--org--name');
  const snapshot = join(repo, 'snapshots', REVISION);
  await mkdir(join(repo, 'blobs'), { recursive: true });
  await mkdir(join(repo, 'refs'));
  await mkdir(snapshot, { recursive: true });
  await writeSafetensorsFile(join(repo, 'blobs', BLOB), tensors);
  await symlink(`../../blobs/${BLOB}`, join(snapshot, 'model.safetensors'));
  await writeFile(join(repo, 'refs', 'main'), REVISION);
  return { repo, snapshot };
}

afterEach(async () => unblockFifos());

describe('hub cache files', () => {
  it('a snapshot file whose blob is still downloading: PATH_NOT_FOUND (by path) and INDEX_SHARD_MISSING (in its directory) name the link, its target and the unfinished download', async () => {
    await withTempDir(async (dir) => {
      const { repo, snapshot } = await makeRepo(dir);
      const blob = join(repo, 'blobs', BLOB);
      await rename(blob, `${blob}.incomplete`);
      const said = `a symbolic link to "../../blobs/${BLOB}" (${JSON.stringify(blob)}), which does not exist (ENOENT); "${BLOB}.incomplete" lies beside that target: its download is unfinished`;
      const byPath = await catchErrorAsync(() => openSafetensorsModel(join(snapshot, 'model.safetensors')));
      expectCode(byPath, 'PATH_NOT_FOUND');
      expect(byPath.message).toContain(`no such file: it is ${said}`);
      const byDir = await catchErrorAsync(() => openSafetensorsModel(snapshot));
      expectCode(byDir, 'INDEX_SHARD_MISSING');
      expect(byDir.message).toContain(`shard "model.safetensors" is ${said}`);
    });
  });

  it('a link target holding a newline or an escape sequence is quoted, as are its absolute path and its .incomplete: the message stays one line', async () => {
    await withTempDir(async (dir) => {
      const target = 'gone\n\u001b[31m.safetensors';
      await writeFile(join(dir, `${target}.incomplete`), '');
      await symlink(target, join(dir, 'model.safetensors'));
      const error = await catchErrorAsync(() => openSafetensorsModel(join(dir, 'model.safetensors')));
      expectCode(error, 'PATH_NOT_FOUND');
      expect(error.message).toContain(
        `it is a symbolic link to "gone\\n\\u001b[31m.safetensors" (${JSON.stringify(join(dir, target))}), which does not exist (ENOENT); "gone\\n\\u001b[31m.safetensors.incomplete" lies beside that target`,
      );
      expect(error.message).not.toContain('\n');
      expect(error.message).not.toContain('\u001b');
    });
  });

  it('a loop of links: IO_ERROR by path, INDEX_SHARD_MISSING in a directory, each saying it is a loop', async () => {
    await withTempDir(async (dir) => {
      await symlink('y.safetensors', join(dir, 'x.safetensors'));
      await symlink('x.safetensors', join(dir, 'y.safetensors'));
      const byPath = await catchErrorAsync(() => openSafetensorsModel(join(dir, 'x.safetensors')));
      expectCode(byPath, 'IO_ERROR');
      expect(byPath.message).toContain('it is a loop of symbolic links (it links to "y.safetensors", and following the links never reaches a file) (ELOOP)');
      const byDir = await catchErrorAsync(() => openSafetensorsModel(dir));
      expectCode(byDir, 'INDEX_SHARD_MISSING');
      expect(byDir.message).toContain('shard "x.safetensors" is a loop of symbolic links');
    });
  });

  it('the repository, its refs/ and refs/main: NOT_SAFETENSORS and HEADER_TOO_LARGE name the snapshot refs/main names', async () => {
    await withTempDir(async (dir) => {
      const { repo, snapshot } = await makeRepo(dir);
      for (const path of [repo, join(repo, 'refs')]) {
        const error = await catchErrorAsync(() => openSafetensorsModel(path));
        expectCode(error, 'NOT_SAFETENSORS');
        expect(error.message).toContain(`its model files are in snapshots/<rev> (one directory per revision); refs/main names snapshots/${REVISION}: open (or build) ${snapshot}`);
      }
      const ref = await catchErrorAsync(() => openSafetensorsModel(join(repo, 'refs', 'main')));
      expectCode(ref, 'HEADER_TOO_LARGE');
      expect(ref.message).toBe(`HEADER_TOO_LARGE: ${join(repo, 'refs', 'main')}: it is not a model file but a Hugging Face hub ref naming revision ${REVISION}: open (or build) ${snapshot}`);
      // The snapshot named opens.
      const model = await openSafetensorsModel(snapshot);
      expect(model.tensors.map((tensor) => tensor.name)).toEqual(['a']);
      await model.close();
    });
  });

  it.skipIf(process.platform !== 'linux')('refs/main a FIFO (or a link to one): NOT_SAFETENSORS at once, without the revision (it waited for a writer forever)', async () => {
    await withTempDir(async (dir) => {
      const { repo } = await makeRepo(dir);
      const main = join(repo, 'refs', 'main');
      await rm(main);
      makeFifo(main);
      const viaLink = join(dir, 'linked');
      await mkdir(join(viaLink, 'snapshots'), { recursive: true });
      await mkdir(join(viaLink, 'refs'));
      await symlink(main, join(viaLink, 'refs', 'main'));
      for (const path of [repo, join(repo, 'refs'), viaLink]) {
        const error = await settlesWithin(catchErrorAsync(() => openSafetensorsModel(path)));
        expectCode(error, 'NOT_SAFETENSORS');
        expect(error.message).toMatch(/: its model files are in snapshots\/<rev> \(one directory per revision\)$/);
      }
    });
  });
});
