// The JSON shapes the CLI prints (kept loose on purpose: the tests check the fields they use).
import { createHash } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { TensorData } from './models.js';

export interface BuildTensorJson {
  name: string;
  key: string | null;
  shard: string;
  offsetBytes: number;
  sizeBytes: number;
  dtype: string;
  shape: number[];
  status: 'encoded' | 'cached' | 'skipped_coverage' | 'skipped_dtype' | 'skipped_size';
  coverage: number | null;
  compBytes: number | null;
}

export interface BuildJson {
  encoded: number;
  cached: number;
  skipped_coverage: number;
  skipped_dtype: number;
  skipped_size: number;
  comp_bytes: number;
  raw_bytes: number;
  ratio: number | null;
  stored_bytes: number;
  aliased: number;
  jobs: number;
  backend: string;
  tensors: BuildTensorJson[];
}

export interface VerifyJson {
  ok: boolean;
  store: { ok: boolean; checked: number; passed: number; decoded: number; problems: { key: string; code: string; message: string }[] };
  model: null | {
    ok: boolean;
    tensors: { name: string; status: 'ok' | 'not_cached' | 'failed'; reason: string | null; key: string | null }[];
    totals: { tensors: number; ok: number; not_cached: number; failed: number };
  };
}

export interface InspectJson {
  entries: { key: string; qualname: string; rawBytes: number; compBytes: number; escapeCount: number; elementCount: number; slices: [string, number, number][] }[];
  totals: { entries: number; slices: number; rawBytes: number; compBytes: number; ratio: number | null; escapeCount: number; elementCount: number };
}

export interface StatsJson {
  tensors: {
    name: string;
    dtype: string;
    shape: number[];
    sizeBytes: number;
    coverage: number | null;
    distinctExponents: number | null;
    entropyBits: number | null;
    escapeCount: number | null;
    predictedBytes: number | null;
    encodable: boolean;
  }[];
  totals: { tensors: number; bf16Tensors: number; encodableTensors: number; rawBytes: number; encodableBytes: number; predictedBytes: number; predictedRatio: number | null };
}

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
