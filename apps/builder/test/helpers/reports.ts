// The JSON the CLI prints is the library's report types serialized (JSON.stringify of them).
import { createHash } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { ModelStatsReport } from '../../src/analyze-model.js';
import type { BuildReport } from '../../src/build-cache.js';
import type { VerifyCommandReport } from '../../src/commands/verify.js';
import type { InspectReport } from '../../src/inspect-cache.js';
import type { TensorData } from './models.js';

export type BuildJson = BuildReport;
export type VerifyJson = VerifyCommandReport;
export type InspectJson = InspectReport;
export type StatsJson = ModelStatsReport;

/** The seed's content key, computed here independently of the store (Python str(tuple(shape))). */
export function seedContentKey(tensor: TensorData): string {
  const shapeText = tensor.shape.length === 1 ? `(${tensor.shape[0]},)` : `(${tensor.shape.join(', ')})`;
  return createHash('sha1').update(shapeText).update('torch.bfloat16').update(String(tensor.data.byteLength)).update(tensor.data).digest('hex');
}

/** Every file under `dir` with its size and mtime: equal snapshots mean nothing was written. */
export async function snapshotDir(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (current: string): Promise<void> => {
    for (const entry of await readdir(current, { withFileTypes: true })) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) await walk(path);
      else {
        const info = await stat(path);
        out[relative(dir, path)] = `${info.size}@${info.mtimeMs}`;
      }
    }
  };
  await walk(dir);
  return out;
}
