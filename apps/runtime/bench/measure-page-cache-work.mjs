#!/usr/bin/env node
// What a page-cache load can reach on this machine, from single-thread rates measured in one run:
//   raw    = read every BF16 tensor's bytes from the (page-cached) shards into an arena;
//   read   = read every cached tensor's blob into a staging slot in the arena;
//   decode = decode those payloads (checksum verified, as the loader does) into the arena.
// Every phase runs on this thread alone, rounds alternating, medians. A load from the cache has to
// do read + decode for its cached tensors where the raw load does raw: raw / (read + decode) is the
// work ratio printed, about where a page-cache load lands when both loads keep every core busy (the
// tensors not cached are the same work on both sides and left out). It is an estimate, not a hard
// bound: on two cores the loader has come out ~10% above it (caches and memory behave differently
// with two threads at work than with one).
// Usage: node bench/measure-page-cache-work.mjs [--rounds 7] [--model DIR --cache DIR]
import { closeSync, openSync, readSync } from 'node:fs';
import { createCodecArena, decode } from '@splitzip/codec';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { openShardCache } from '@splitzip/runtime';
import { resolveBenchModel } from './build-model-cache.mjs';
import { argValue, median } from './bench-helpers.mjs';

const ROUNDS = Number(argValue('--rounds', '7'));

const { modelDir, cacheDir } = await resolveBenchModel(argValue('--model', undefined), argValue('--cache', undefined));
const model = await openSafetensorsModel(modelDir);
const cache = await openShardCache(cacheDir);
const cached = [];
for (const t of model.tensors) {
  const entry = cache.lookupBySlice(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes);
  if (entry !== undefined && entry.compBytes > 0) cached.push({ tensor: t, entry });
}
const largestRaw = Math.max(...cached.map((c) => c.tensor.slice.sizeBytes));
const largestBlob = Math.max(...cached.map((c) => c.entry.compBytes));
const arena = createCodecArena(largestRaw + largestBlob + 4096);
const out = arena.allocate(largestRaw);
const slot = arena.allocate(largestBlob);
out.fill(0);
slot.fill(0);
const outValues = new Uint16Array(out.buffer, out.byteOffset, out.length >>> 1);

const readRange = (path, target, position) => {
  const fd = openSync(path, 'r');
  try {
    for (let done = 0; done < target.length; ) {
      const n = readSync(fd, target, done, target.length - done, position + done);
      if (n === 0) throw new Error(`${path} ended early`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
};
const blobPath = (entry) => `${cacheDir}/${entry.blob}`;

const phases = {
  raw: () => {
    for (const { tensor } of cached) readRange(tensor.shardPath, out.subarray(0, tensor.slice.sizeBytes), tensor.slice.offsetBytes);
  },
  read: () => {
    for (const { entry } of cached) readRange(blobPath(entry), slot.subarray(0, entry.compBytes), 0);
  },
  decode: () => {
    // Each payload is read once up front per round (untimed here), then decoded from the slot.
    let ms = 0;
    for (const { entry } of cached) {
      readRange(blobPath(entry), slot.subarray(0, entry.compBytes), 0);
      const start = performance.now();
      decode(slot.subarray(0, entry.compBytes), outValues.subarray(0, entry.rawBytes >>> 1));
      ms += performance.now() - start;
    }
    return ms;
  },
};
const times = { raw: [], read: [], decode: [] };
for (let r = -1; r < ROUNDS; r++) {
  for (const name of r % 2 === 0 ? ['raw', 'read', 'decode'] : ['decode', 'read', 'raw']) {
    const start = performance.now();
    const inner = phases[name]();
    if (r >= 0) times[name].push(typeof inner === 'number' ? inner : performance.now() - start);
  }
}
const rawBytes = cached.reduce((sum, c) => sum + c.tensor.slice.sizeBytes, 0);
const blobBytes = cached.reduce((sum, c) => sum + c.entry.compBytes, 0);
const [raw, read, dec] = [median(times.raw), median(times.read), median(times.decode)];
console.log(`${cached.length} cached tensors, ${(rawBytes / 1e9).toFixed(3)} GB raw, ${(blobBytes / 1e9).toFixed(3)} GB of blobs; one thread, ${ROUNDS} alternating rounds (median ms)`);
console.log(`raw read ${raw.toFixed(1)} ms (${(rawBytes / raw / 1e6).toFixed(2)} GB/s); blob read ${read.toFixed(1)} ms (${(blobBytes / read / 1e6).toFixed(2)} GB/s); decode, verified ${dec.toFixed(1)} ms (${(rawBytes / dec / 1e6).toFixed(2)} GB/s of BF16)`);
console.log(`work ratio raw / (blob read + decode) = ${(raw / (read + dec)).toFixed(3)}: a page-cache load from the cache does 1/${(raw / (read + dec)).toFixed(3)} the raw load's work per byte`);
process.exit(0);
