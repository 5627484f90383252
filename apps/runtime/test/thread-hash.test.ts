// Content keys hashed on the decode threads (ThreadDecoder.hashContentKey, hashTensorKey): the
// runtime's check of raw bytes against a cache entry (a model copied, touched, or a fine-tune of
// the same layout), its verifyDigest option and its miss reports. Every key must be
// computeContentKey's, whether the bytes are hashed in place (shared memory) or sent in pieces
// through shared scratch.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCodecArena } from '@splitzip/codec';
import { computeContentKey, formatContentKeyPrefix } from '@splitzip/store';
import type { DecodeBackend } from '../src/create-cpu-decoder.js';
import { createCpuDecoder } from '../src/create-cpu-decoder.js';
import { createThreadDecoder, HASH_PIECE_BYTES } from '../src/create-thread-decoder.js';
import { hashTensorKey } from '../src/hash-tensor-key.js';
import { loadModel } from '../src/load-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, randomBytes, readAllRaw, sameBytes, writeModel, tunedWeights, type FixtureTensor } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('thread-hash'));
});
afterAll(async () => {
  await cleanup?.();
});

/** `bytes` as a U8 tensor of shape [n]: any length, odd ones included. */
const u8Prefix = (bytes: Uint8Array) => formatContentKeyPrefix([bytes.byteLength], 'U8', bytes.byteLength);

describe('ThreadDecoder.hashContentKey', () => {
  const decoder = createThreadDecoder({ threads: 2, hashInlineMaxBytes: 1 });
  afterAll(() => decoder.close());

  it('bytes outside shared memory, in pieces: the store key for lengths around the piece size, odd ones, and views at odd offsets', async () => {
    await decoder.warmUp();
    const source = randomBytes(3 * HASH_PIECE_BYTES + 4096, 5);
    const lengths = [1, 3, HASH_PIECE_BYTES - 1, HASH_PIECE_BYTES, HASH_PIECE_BYTES + 1, 2 * HASH_PIECE_BYTES, 3 * HASH_PIECE_BYTES + 777];
    for (const length of lengths) {
      for (const offset of [0, 13]) {
        const bytes = source.subarray(offset, offset + length);
        const hashed = await decoder.hashContentKey(bytes, u8Prefix(bytes));
        expect(hashed?.key, `${length} bytes at ${offset}`).toBe(computeContentKey(bytes, [length], 'U8'));
      }
    }
    // The source was only read.
    expect(sameBytes(source, randomBytes(3 * HASH_PIECE_BYTES + 4096, 5))).toBe(true);
  });

  it('bytes in shared memory (a SharedArrayBuffer, a codec arena): hashed in place, the store key', async () => {
    const shared = new Uint8Array(new SharedArrayBuffer(2 * HASH_PIECE_BYTES + 4096));
    shared.set(randomBytes(shared.length, 6));
    const arena = createCodecArena(2 * HASH_PIECE_BYTES + 4096, { threads: 2 });
    const inArena = arena.allocate(HASH_PIECE_BYTES + 3);
    inArena.set(randomBytes(inArena.length, 7));
    for (const bytes of [shared, shared.subarray(5, 5 + HASH_PIECE_BYTES + 1), inArena]) {
      const hashed = await decoder.hashContentKey(bytes, u8Prefix(bytes));
      expect(hashed?.key).toBe(computeContentKey(bytes, [bytes.byteLength], 'U8'));
      expect(hashed?.busyMs).toBeGreaterThanOrEqual(0);
    }
  });

  it('many tensors at once, shared and not, interleaved on the same threads: each its own key', async () => {
    const tensors = Array.from({ length: 8 }, (_, k) => {
      const bytes = randomBytes(HASH_PIECE_BYTES + 1000 * k + 1, 20 + k);
      if (k % 2 === 0) return bytes;
      const shared = new Uint8Array(new SharedArrayBuffer(bytes.length));
      shared.set(bytes);
      return shared;
    });
    const before = decoder.stats().threadHashes;
    const keys = await Promise.all(tensors.map((bytes) => decoder.hashContentKey(bytes, u8Prefix(bytes))));
    tensors.forEach((bytes, k) => expect(keys[k]?.key, `tensor ${k}`).toBe(computeContentKey(bytes, [bytes.byteLength], 'U8')));
    expect(decoder.stats().threadHashes - before).toBe(8);
  });

  it('declines (undefined, nothing done) what the calling thread should hash: below hashInlineMaxBytes, empty, after close', async () => {
    const bounded = createThreadDecoder({ threads: 1, hashInlineMaxBytes: 1024 });
    await bounded.warmUp();
    expect(bounded.hashContentKey(new Uint8Array(1023), 'x')).toBeUndefined();
    expect(bounded.hashContentKey(new Uint8Array(0), 'x')).toBeUndefined();
    const at = new Uint8Array(1024);
    expect((await bounded.hashContentKey(at, u8Prefix(at)))?.key).toBe(computeContentKey(at, [1024], 'U8'));
    expect(bounded.stats().threadHashes).toBe(1);
    await bounded.close();
    expect(bounded.hashContentKey(new Uint8Array(4096), 'x')).toBeUndefined();
    expect(() => createThreadDecoder({ hashInlineMaxBytes: -1 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('memory of hashes on threads', () => {
  it("pieces take piece-sized scratch, never a decode's tensor-sized one (which the next decode would allocate again)", async () => {
    const values = new Uint16Array(bf16Weights(1 << 22, 31).buffer); // 8 MiB of values, 4M
    const { calibrateCodebook, encode, readPayloadMeta } = await import('@splitzip/codec');
    const payload = encode(values, calibrateCodebook(values).codebook);
    const meta = readPayloadMeta(payload);
    const decoder = createThreadDecoder({ threads: 1, hashInlineMaxBytes: 1 });
    try {
      await decoder.warmUp();
      // Plain payload and output: both through scratch, kept for the next decode.
      const out = new Uint16Array(values.length);
      await decoder.decode(payload, meta, out, { verifyChecksum: true });
      const afterDecode = decoder.stats().scratchAllocations;
      expect(afterDecode).toBe(2);
      const tensor = randomBytes(2 * HASH_PIECE_BYTES + 3, 32);
      // The sizes of the shared buffers allocated from here on.
      const allocated: number[] = [];
      const Original = globalThis.SharedArrayBuffer;
      globalThis.SharedArrayBuffer = new Proxy(Original, {
        construct: (target, args: [number]) => (allocated.push(args[0]), new target(...args)),
      });
      try {
        const hashing = decoder.hashContentKey(tensor, u8Prefix(tensor));
        const decoding = decoder.decode(payload, meta, out, { verifyChecksum: true });
        expect((await hashing)?.key).toBe(computeContentKey(tensor, [tensor.length], 'U8'));
        await decoding;
      } finally {
        globalThis.SharedArrayBuffer = Original;
      }
      // Two piece buffers are new; the decode found its own two again.
      expect(decoder.stats().scratchAllocations).toBe(afterDecode + 2);
      expect(allocated).toEqual([HASH_PIECE_BYTES, HASH_PIECE_BYTES]);
      expect(sameBytes(new Uint8Array(out.buffer), new Uint8Array(values.buffer))).toBe(true);
    } finally {
      await decoder.close();
    }
  });

  it('a shared buffer hashed in place is not kept resident by the idle thread once the caller drops it', async () => {
    const { setFlagsFromString } = await import('node:v8');
    const { runInNewContext } = await import('node:vm');
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const decoder = createThreadDecoder({ threads: 1, hashInlineMaxBytes: 1 });
    try {
      await decoder.warmUp();
      const residentMiB = () => process.memoryUsage().rss / 2 ** 20;
      const hashDropped = async () => {
        const bytes = new Uint8Array(new SharedArrayBuffer(256 << 20));
        bytes.fill(1);
        await decoder.hashContentKey(bytes, u8Prefix(bytes));
      };
      const before = residentMiB();
      await hashDropped();
      const held = residentMiB();
      expect(held - before).toBeGreaterThan(200);
      for (let k = 0; k < 20 && residentMiB() - before > 64; k += 1) {
        gc();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(residentMiB() - before).toBeLessThan(64);
    } finally {
      await decoder.close();
    }
  });
});

describe('a hash in pieces when its thread goes away', () => {
  it('closed mid-tensor: the hash settles (rejected, never hanging), and hashTensorKey hashes on the calling thread instead', async () => {
    const bytes = randomBytes(6 * HASH_PIECE_BYTES + 5, 9);
    const expected = computeContentKey(bytes, [bytes.length], 'U8');
    const closing = createThreadDecoder({ threads: 1, hashInlineMaxBytes: 1 });
    await closing.warmUp();
    const hashing = closing.hashContentKey(bytes, u8Prefix(bytes));
    expect(hashing).toBeInstanceOf(Promise);
    const outcome = hashing!.then((result) => ({ result }), (error: unknown) => ({ error }));
    await new Promise((resolve) => setTimeout(resolve, 1));
    await closing.close();
    const settled = await outcome;
    // Either the thread finished first, with the right key, or the hash failed: never a wrong key.
    if ('result' in settled) expect(settled.result.key).toBe(expected);
    else expect(settled.error).toMatchObject({ code: 'WORKER_FAILED' });
    expect((await hashTensorKey(closing, bytes, [bytes.length], 'U8')).key).toBe(expected);
  });
});

describe('a job the thread decoder cannot send', () => {
  it('is rejected, not counted, and leaves the worker unreferenced: the process still exits', () => {
    // A prefix that cannot be cloned makes postMessage throw inside dispatch (a misuse, but the
    // same holds for any job that fails to send): it stayed pending, its worker referenced for good.
    const entry = JSON.stringify(fileURLToPath(new URL('../dist/index.js', import.meta.url)));
    const script = `
      import { createThreadDecoder } from ${entry};
      const decoder = createThreadDecoder({ threads: 1, hashInlineMaxBytes: 1 });
      await decoder.warmUp();
      const bytes = new Uint8Array(new SharedArrayBuffer(64));
      const outcome = await decoder.hashContentKey(bytes, (() => 'x')).then(() => 'resolved', (error) => error.name);
      console.log(outcome, decoder.stats().jobs);
    `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(run.error).toBeUndefined();
    expect(run.stdout.trim()).toBe('DataCloneError 0'); // not counted as a job either
    expect(run.status).toBe(0);
  });
});

describe('hashTensorKey', () => {
  const bytes = bf16Weights(4096, 3);
  const expected = computeContentKey(bytes, [64, 64], 'BF16');

  it('hashes on the calling thread when the backend has no threads, declines, or its thread fails', async () => {
    const declining: DecodeBackend = { ...createCpuDecoder(), hashContentKey: () => undefined };
    const failing: DecodeBackend = { ...createCpuDecoder(), hashContentKey: () => Promise.reject(new Error('thread died')) };
    for (const backend of [createCpuDecoder(), declining, failing]) {
      const { key, cpuMs } = await hashTensorKey(backend, bytes, [64, 64], 'BF16');
      expect(key).toBe(expected);
      expect(cpuMs).toBeGreaterThanOrEqual(0);
    }
  });

  it("bytes that cannot be the tensor: the store's INVALID_ARGUMENT before any thread is asked", async () => {
    let asked = 0;
    const counting: DecodeBackend = { ...createCpuDecoder(), hashContentKey: () => (asked++, undefined) };
    await expect(hashTensorKey(counting, bytes, [64, 65], 'BF16')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(asked).toBe(0);
  });
});

describe('loads that hash on the decode threads', () => {
  /** Two BF16 tensors per shard, two shards; `changedSeed` changes b.weight only. */
  const tensors = (changedSeed = 0): FixtureTensor[] => tunedWeights(['a', 'b', 'c', 'd'], 11, changedSeed);

  it("a copy of the model and a fine-tune of it, checked against the base's cache with every hash on a thread: unchecked then cached, the changed tensor stale, every byte the file's", async () => {
    const base = await writeModel(join(root, 'base'), tensors(), 2 * 8192 + 1024);
    const cacheDir = join(root, 'cache');
    await buildCache(base, cacheDir);
    await base.close();
    const copy = await writeModel(join(root, 'copy'), tensors(), 2 * 8192 + 1024);
    const tuned = await writeModel(join(root, 'tuned'), tensors(100), 2 * 8192 + 1024);
    // Every tensor through the threads (the fixture's are 8 KiB).
    const backend = createThreadDecoder({ threads: 2, hashInlineMaxBytes: 1 });
    await backend.warmUp();
    const load = async (model: typeof copy, options: { verifyDigest?: boolean } = {}) => {
      const raw = await readAllRaw(model);
      const cache = await openShardCache(cacheDir);
      try {
        const run = loadModel(model, cache, { backend, verifyDigest: options.verifyDigest ?? false });
        for await (const tensor of run) expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
        return new Map(run.reports.map((r) => [r.name, r]));
      } finally {
        await cache.close();
      }
    };
    try {
      const first = await load(copy);
      for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) expect(first.get(name), name).toMatchObject({ source: 'raw', reason: 'unchecked' });
      expect(backend.stats().threadHashes).toBe(4);
      const again = await load(copy);
      for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) expect(again.get(name), name).toMatchObject({ source: 'cache', reason: 'cached' });

      const tunedReports = await load(tuned);
      expect(tunedReports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      for (const name of ['a.weight', 'c.weight', 'd.weight']) expect(tunedReports.get(name), name).toMatchObject({ source: 'raw', reason: 'unchecked' });
      expect(backend.stats().threadHashes).toBe(8);

      // verifyDigest: each decoded tensor hashed on a thread against its entry's key.
      const verified = await load(copy, { verifyDigest: true });
      for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) expect(verified.get(name), name).toMatchObject({ source: 'cache', digestVerified: true });
      expect(backend.stats().threadHashes).toBe(12);

      // The same tensors under other shard names (no slice bound): each hashed on a thread to find
      // the entry that holds its bytes, for the miss report.
      const renamed = await writeModel(join(root, 'renamed'), tensors(), 2 * 8192 + 1024, 'other');
      try {
        const misses = await load(renamed);
        for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) {
          expect(misses.get(name), name).toMatchObject({ source: 'raw', reason: 'missing' });
          expect(misses.get(name)?.detail, name).toMatch(
            /^entry [0-9a-f]{40} \(.*\) holds these bytes, but this slice was not bound to it \(the cache was built from other shard names or offsets, or not from this model, or its binding was removed: `splitzip gc --model` of another model or revision of these shard names\): bound now: later loads through this cache handle serve it from the cache, and the binding is being recorded for other processes$/,
          );
        }
        expect(backend.stats().threadHashes).toBe(16);
        // Bound by that load (its handle's close waited for the record): the next one hashes nothing.
        const bound = await load(renamed);
        for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) expect(bound.get(name), name).toMatchObject({ source: 'cache', reason: 'cached' });
        expect(backend.stats().threadHashes).toBe(16);
      } finally {
        await renamed.close();
      }
    } finally {
      await backend.close();
      await copy.close();
      await tuned.close();
    }
  });
});
