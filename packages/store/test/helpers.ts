import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calibrateCodebook, encode, type Codebook } from '@splitzip/codec';
import { Packr } from 'msgpackr';
import { afterAll } from 'vitest';
import { createRandom as createRng } from '@splitzip/test-support/random';
import { computeContentKey, openCacheStore, type AddEntryInput } from '../src/index.js';

/** Deterministic PRNG (mulberry32, from @splitzip/test-support) so every test input is reproducible. */
export { createRng };

/** BF16 bit patterns of weight-like values (mostly a few exponents, some escapes). */
export function makeBf16Values(count: number, seed: number): Uint16Array {
  const rng = createRng(seed);
  const values = new Uint16Array(count);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let i = 0; i < count; i++) {
    f32[0] = (rng() - 0.5) * 0.1 * (rng() < 0.01 ? 1000 : 1);
    values[i] = u32[0]! >>> 16;
  }
  return values;
}

export interface TestTensor {
  values: Uint16Array;
  bytes: Uint8Array;
  shape: number[];
  key: string;
  sha256: string;
  payload: Uint8Array;
}

export function makeTensor(shape: number[], seed: number, chunkSize = 64): TestTensor {
  const count = shape.reduce((a, b) => a * b, 1);
  const values = makeBf16Values(count, seed);
  return toTestTensor(values, shape, calibrateCodebook(values).codebook, chunkSize);
}

/** `values` of `shape` with their content key, SHA-256 and payload under `codebook`. */
export function toTestTensor(values: Uint16Array, shape: number[], codebook: Codebook, chunkSize: number): TestTensor {
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  return {
    values,
    bytes,
    shape,
    key: computeContentKey(bytes, shape, 'BF16'),
    sha256: createHash('sha256').update(bytes).digest('hex'),
    payload: encode(values, codebook, { chunkSize }),
  };
}

export function toInput(tensor: TestTensor, qualname: string, sliceKeys?: AddEntryInput["sliceKeys"]): AddEntryInput {
  return { key: tensor.key, qualname, payload: tensor.payload, shape: tensor.shape, dtype: 'BF16', sha256: tensor.sha256, sliceKeys };
}

const dirs: string[] = [];
// Every test file that imports this module removes what makeTempDir made at its end, whether or not
// it calls removeTempDirs itself (two files did not, and each run left ~18 caches in the temp dir).
afterAll(() => removeTempDirs());

export async function makeTempDir(prefix = 'splitzip-store-'): Promise<string> {
  // Resolved: a store names files under the directory it resolved at open (TMPDIR may be a link, as on macOS).
  const dir = await realpath(await mkdtemp(join(tmpdir(), prefix)));
  dirs.push(dir);
  return dir;
}

/** Removes `dir` with the temp dirs (a crash test's copy `<root>-crash-<n>` is a sibling of its cache, not inside it). */
export function trackTempDir(dir: string): void {
  dirs.push(dir);
}

export async function removeTempDirs(): Promise<void> {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
}

/** Runs `fn` and returns the error it throws (fails the test if nothing is thrown). */
export async function catchError(fn: () => unknown): Promise<Error & { code?: string; entry?: string; path?: string; details?: Record<string, unknown> }> {
  try {
    await fn();
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error('expected an error, none was thrown');
}

const journalPackr = new Packr({ useRecords: false });
/** A journal record of `ops`, framed exactly as the README documents (independent of the package's encoder). */
export function frameJournalRecord(ops: unknown[]): Buffer {
  const body = journalPackr.pack(ops);
  const head = Buffer.alloc(12);
  head.writeUInt32LE(0x524a5a53, 0);
  head.writeUInt32LE(body.length, 4);
  head.writeUInt32LE(crc32(body, crc32(head.subarray(4, 8))) >>> 0, 8);
  return Buffer.concat([head, body]);
}

/** A closed cache holding `count` entries in manifest.json (the journal folded in: journal.2 is its header alone). */
export async function makeCache(count = 1): Promise<{ root: string; tensors: TestTensor[] }> {
  const root = await makeTempDir();
  const store = await openCacheStore(root, { create: true });
  const tensors = Array.from({ length: count }, (_, i) => makeTensor([40, 3], 7000 + i));
  await store.addEntries(tensors.map((t, i) => toInput(t, `layer.${i}`, [[`shard-${i}`, 0, 240]])));
  await store.close();
  return { root, tensors };
}

/** Four entries with one binding each in the manifest, and two more (bound) only in journal.2. */
export async function makeCacheWithJournal(): Promise<{ root: string; inManifest: TestTensor[]; inJournal: TestTensor[] }> {
  const { root, tensors: inManifest } = await makeCache(4);
  const inJournal = [makeTensor([16, 4], 9341), makeTensor([12, 8], 9342)];
  const writer = await openCacheStore(root, { compactOnClose: false });
  for (const [i, t] of inJournal.entries()) await writer.addEntry(toInput(t, `later.${i}`, [[`later-shard`, 4096 * i, t.bytes.length]]));
  await writer.close();
  return { root, inManifest, inJournal };
}

/**
 * An older copy of the manifest put back beside a newer journal holding commits: journal.3 holds
 * one commit (`late`, bound) made after manifest 3; manifest 2 and journal.2 as a backup kept them are put back.
 */
export async function makeRestoredOlderCopy(): Promise<{ root: string; inManifest: TestTensor[]; inJournal: TestTensor[]; late: TestTensor; newerJournal: Buffer }> {
  const { root, inManifest, inJournal } = await makeCacheWithJournal();
  const [oldManifest, oldJournal] = [await readFile(join(root, 'manifest.json')), await readFile(join(root, 'journal.2'))];
  const writer = await openCacheStore(root, { compactOnClose: false });
  await writer.compact();
  const late = makeTensor([10, 10], 9350);
  await writer.addEntry(toInput(late, 'late', [['late-shard', 0, late.bytes.length]]));
  await writer.close();
  const newerJournal = await readFile(join(root, 'journal.3'));
  await writeFile(join(root, 'manifest.json'), oldManifest);
  await writeFile(join(root, 'journal.2'), oldJournal);
  return { root, inManifest, inJournal, late, newerJournal };
}
