import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSafetensorsModel, parseSafetensorsBytes, writeSafetensorsFile, type TensorToWrite } from '../src/index.js';
import { buildRawFile, catchError, catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const tensors: TensorToWrite[] = [
  { name: 'a', dtype: 'BF16', shape: [4], data: new Uint8Array(8).fill(1) },
  { name: 'b', dtype: 'F32', shape: [2], data: new Uint8Array(8).fill(2) },
];

describe('files that are not safetensors (hub downloads gone wrong)', () => {
  it('a Git LFS pointer saved as model.safetensors: HEADER_TOO_LARGE says it is text and to run git lfs pull', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      await writeFile(path, `version https://git-lfs.github.com/spec/v1\noid sha256:${'ab'.repeat(32)}\nsize 12345\n`);
      const error = await catchErrorAsync(() => openSafetensorsModel(path));
      expectCode(error, 'HEADER_TOO_LARGE');
      expect(error.message).toContain('looks like a Git LFS pointer');
      expect(error.message).toContain('git lfs pull');
    });
  });

  it('an HTML page saved as model.safetensors: HEADER_TOO_LARGE says to download it again', () => {
    const bytes = new TextEncoder().encode('<!DOCTYPE html>\n<html><body>Access denied</body></html>\n');
    const error = catchError(() => parseSafetensorsBytes(bytes, 'model.safetensors'));
    expectCode(error, 'HEADER_TOO_LARGE');
    expect(error.message).toContain('HTML or error page');
    expect(error.message).toContain('download it again');
  });

  it('a binary length over the limit says nothing of text', () => {
    const error = catchError(() => parseSafetensorsBytes(buildRawFile('{}', undefined, 0xffffffffffffffffn), 'x.safetensors'));
    expectCode(error, 'HEADER_TOO_LARGE');
    expect(error.message).not.toContain('text');
  });

  it('a file cut short (an interrupted download): DATA_OUT_OF_BOUNDS says it looks truncated', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      await writeSafetensorsFile(path, tensors);
      const bytes = await readFile(path);
      await writeFile(path, bytes.subarray(0, bytes.length - 5));
      const error = await catchErrorAsync(() => openSafetensorsModel(path));
      expectCode(error, 'DATA_OUT_OF_BOUNDS');
      expect(error.message).toContain('looks truncated');
    });
  });
});
