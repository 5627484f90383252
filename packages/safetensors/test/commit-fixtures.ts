// What the commit tests (commit-*.test.ts) share: the old and new model of three one-byte-filled
// tensors, the record and lock names of its index, a snapshot of a directory, what a reader finds,
// and a writer stopped for good at a step of its commit (as after a kill -9).
import { readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { createShardedModelWriter, isSafetensorsError, openSafetensorsModel, readTensorBytes, writeShardedModel, type TensorToWrite } from '../src/index.js';

/** Three 4-byte U8 tensors `a`, `b`, `c`, every byte `fill` (the old model 1, the new one 2). */
export const tensors = (fill: number): TensorToWrite[] => ['a', 'b', 'c'].map((name) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(fill) }));

/** The commit record and the commit lock of `model.safetensors.index.json`. */
export const RECORD = '.model.safetensors.index.json.commit';
export const LOCK = `${RECORD}.lock`;

/** Every file of `dir` (names sorted) as hex, but those named in `skip`. */
export async function snapshot(dir: string, ...skip: string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) if (!skip.includes(name)) out[name] = (await readFile(join(dir, name))).toString('hex');
  return out;
}

/** What a reader finds: 'old' or 'new' (every tensor byte 1 or 2), 'MIXED', or the error's message. */
export async function observe(root: string): Promise<string> {
  let model;
  try {
    model = await openSafetensorsModel(root);
  } catch (error) {
    if (isSafetensorsError(error)) return error.message;
    throw error;
  }
  try {
    const fills = new Set<number>();
    for (const tensor of model.tensors) for (const byte of await readTensorBytes(model, tensor)) fills.add(byte);
    return fills.size === 1 && model.tensors.length === 3 ? (fills.has(1) ? 'old' : 'new') : 'MIXED';
  } finally {
    await model.close();
  }
}

/**
 * Writes the old model (3 shards) into `root`, then overwrites it and stops the commit for good
 * before its step `k`: the observer never returns, so no cleanup or retry runs, as after a kill -9.
 */
export async function stopWriterAtStep(root: string, k: number, maxShardBytes = 4): Promise<void> {
  await rm(root, { recursive: true, force: true });
  await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
  let calls = 0;
  let stopped!: () => void;
  const reached = new Promise<void>((done) => (stopped = done));
  setCommitStepObserver(() => {
    if (calls++ < k) return undefined;
    stopped();
    return new Promise<void>(() => undefined);
  });
  const writer = await createShardedModelWriter(root, tensors(2), { maxShardBytes });
  await writer.write(new Uint8Array(12).fill(2));
  void writer.close();
  await reached;
  setCommitStepObserver(undefined);
}
