// The model fixture of the file-binding load tests: revision A (four 64x64 BF16 layers) and
// revision B (A with layer 2 changed: its slice gets a second binding), the cache's manifest
// format, a stampless ByteSource, and the cleanups run once after the file's tests.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ByteSource, SafetensorsModel } from '@splitzip/safetensors';
import { afterAll } from 'vitest';
import { bf16Weights, makeTempDir, writeModel, type FixtureTensor } from '../fixtures.js';

/** Cleanups run after the file's tests, last pushed first; call at the top of a test file. */
export function useCleanups(): (() => Promise<void>)[] {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  return cleanups;
}

export const name = (k: number) => `layers.${String(k).padStart(2, '0')}.weight`;
export const revisionA = (): FixtureTensor[] => Array.from({ length: 4 }, (_, k) => ({ name: name(k), dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 100 + k) }));
/** A with layer 2 changed. */
export const revisionB = (): FixtureTensor[] => revisionA().map((t, k) => (k === 2 ? { ...t, data: bf16Weights(4096, 999) } : t));

export async function manifestFormat(cacheDir: string): Promise<number> {
  return (JSON.parse(await readFile(join(cacheDir, 'manifest.json'), 'utf8')) as { format: number }).format;
}

/** A model directory as a ByteSource whose objects have no ETag: its shards have no stamp. */
export async function stamplessSource(dir: string): Promise<ByteSource> {
  const names = await readdir(dir);
  return {
    url: `mem://${dir}/`,
    list: async () => names,
    open: async (file) => {
      if (!names.includes(file)) return undefined;
      const bytes = await readFile(join(dir, file));
      return { sizeBytes: bytes.length, readInto: async (offset: number, target: Uint8Array) => target.set(bytes.subarray(offset, offset + target.length)) };
    },
  };
}

/** A temp dir (prefix `tempPrefix`) holding models A and B and the path of a cache beside them; all closed and removed by `cleanups`. */
export async function writeRevisions(tempPrefix: string, cleanups: (() => Promise<void>)[]): Promise<{ dir: string; A: SafetensorsModel; B: SafetensorsModel; cacheDir: string }> {
  const { dir, cleanup } = await makeTempDir(tempPrefix);
  cleanups.push(cleanup);
  const A = await writeModel(join(dir, 'A'), revisionA(), 80 * 1024);
  const B = await writeModel(join(dir, 'B'), revisionB(), 80 * 1024);
  cleanups.push(() => A.close(), () => B.close());
  return { dir, A, B, cacheDir: join(dir, 'cache') };
}
