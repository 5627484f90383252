// The streamed cache path (decode-streamed-payload.ts): a format-v3 payload read through a custom
// reader in segment order and decoded segment by segment as its spans arrive. Bit-exact against the
// shards, reads in the order the decode needs them, and failures that never leave a read in flight
// nor wrong values behind.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeSegmentSpans, readPayloadMeta, SEGMENT_VALUES, type PayloadLayout } from '@splitzip/codec';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { createCpuDecoder, type DecodeBackend } from '../src/create-cpu-decoder.js';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, type FixtureTensor, writeModel } from './fixtures.js';

const S = SEGMENT_VALUES;
// Two segments (under the thread decoder's default inline bound of 2^21), three segments (above
// it), one segment (never streamed), and small tensors.
const TENSORS: FixtureTensor[] = [
  { name: 'small', dtype: 'BF16', shape: [3001], data: bf16Weights(3001, 1) },
  { name: 'two', dtype: 'BF16', shape: [S + 4099], data: bf16Weights(S + 4099, 2, 0.004) },
  { name: 'one', dtype: 'BF16', shape: [S - 3], data: bf16Weights(S - 3, 3) },
  { name: 'three', dtype: 'BF16', shape: [3, S - 5], data: bf16Weights(3 * (S - 5), 4, 0.004) },
  { name: 'tail', dtype: 'BF16', shape: [77], data: bf16Weights(77, 5) },
];

let root: string;
let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let raw: Map<string, Uint8Array>;
let cacheIndex = 0;

beforeAll(async () => {
  const temp = await makeTempDir('streamed');
  root = temp.dir;
  cleanup = temp.cleanup;
  model = await writeModel(join(root, 'model'), TENSORS, 8 * 1024 * 1024);
  raw = await readAllRaw(model);
}, 60_000);
afterAll(async () => {
  await model?.close();
  await cleanup?.();
});

async function freshCache(): Promise<ShardCache> {
  cacheIndex += 1;
  const dir = join(root, `cache-${cacheIndex}`);
  await buildCache(model, dir);
  return openShardCache(dir);
}

interface ReadEvent {
  path: string;
  from: number;
  to: number;
  asked: number;
  done: number;
}

/** A file reader that records every read (ask and completion order) and can fail chosen ones. */
function createRecordingReader(failWhen?: (path: string, from: number) => boolean) {
  const inner = createFileReader();
  const events: ReadEvent[] = [];
  let clock = 0;
  let inFlight = 0;
  const inFlightAtRawRead: number[] = [];
  const reader: ByteReader = {
    async readExact(path, target, positionBytes) {
      // A shard read of a tensor that fell back: no blob read may still be running then.
      if (!path.endsWith('.bin')) inFlightAtRawRead.push(inFlight);
      const event: ReadEvent = { path, from: positionBytes, to: positionBytes + target.byteLength, asked: clock++, done: -1 };
      events.push(event);
      if (path.endsWith('.bin')) inFlight += 1;
      try {
        // A turn of the event loop first, so that reads asked together are in flight together.
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (failWhen?.(path, positionBytes)) throw Object.assign(new Error(`injected failure at ${positionBytes}`), { code: 'EIO' });
        await inner.readExact(path, target, positionBytes);
      } finally {
        if (path.endsWith('.bin')) inFlight -= 1;
        event.done = clock++;
      }
    },
    close: () => inner.close(),
  };
  return { reader, events, inFlightAtRawRead };
}

function entryOf(cache: ShardCache, name: string) {
  const info = model.tensors.find((t) => t.name === name)!;
  const entry = cache.lookupBySlice(info.slice.shardName, info.slice.offsetBytes, info.slice.sizeBytes);
  if (entry === undefined) throw new Error(`${name} is not cached`);
  return { entry, blob: cache.blobPath(entry) };
}

async function layoutOf(blob: string): Promise<PayloadLayout> {
  return readPayloadMeta(new Uint8Array(await readFile(blob))).layout;
}

async function loadAll(cache: ShardCache, options: Parameters<typeof loadModel>[2]) {
  const load = loadModel(model, cache, options);
  for await (const tensor of load) {
    if (!sameBytes(tensor.data, raw.get(tensor.name)!)) expect.fail(`${tensor.name} differs from its shard bytes`);
  }
  return load;
}

describe.each([
  ['cpu', () => createCpuDecoder(), ['two', 'three']],
  ['threads (default inline bound 2^21)', () => createThreadDecoder({ threads: 1 }), ['two']],
] as const)('streamed decode, %s backend', (_label, makeBackend, streamedNames) => {
  it('is bit-exact, streams exactly the multi-segment payloads it decodes inline, and reads in segment order', async () => {
    const cache = await freshCache();
    const backend = makeBackend();
    const { reader, events } = createRecordingReader();
    try {
      const load = await loadAll(cache, { reader, backend });
      expect(load.totals.fromCache).toBe(TENSORS.length);
      for (const report of load.reports) expect(report.streamed === true, report.name).toBe((streamedNames as readonly string[]).includes(report.name));
      for (const name of streamedNames) {
        const { blob, entry } = entryOf(cache, name);
        const layout = await layoutOf(blob);
        const reads = events.filter((e) => e.path === blob);
        const segments = Math.ceil(entry.meta.elementCount / S);
        const spans = Array.from({ length: segments }, (_, k) => computeSegmentSpans(layout, k));
        // The header and the escape sections first, then each segment's codes and sm spans: every byte once.
        const expected = [
          [0, layout.codes.offsetBytes],
          [layout.escapeIndex.offsetBytes, layout.totalBytes],
          ...spans.flatMap((span) => [
            [span.codes, span.codesEnd],
            [span.sm, span.smEnd],
          ]),
        ];
        expect(reads.map((e) => [e.from, e.to])).toEqual(expected);
        // Segment k's reads are asked only once segment k - 1's codes span is in.
        for (let k = 1; k < segments; k++) {
          const previousCodes = reads[2 + 2 * (k - 1)]!;
          expect(reads[2 + 2 * k]!.asked).toBeGreaterThan(previousCodes.done);
          expect(reads[3 + 2 * k]!.asked).toBeGreaterThan(previousCodes.done);
        }
      }
      // A payload of one segment is read whole, as before.
      const one = entryOf(cache, 'one');
      expect(events.filter((e) => e.path === one.blob).map((e) => [e.from, e.to])).toEqual([[0, one.entry.compBytes]]);
    } finally {
      await backend.close?.();
      await reader.close();
      await cache.close();
    }
  });

  it('into an output at an odd byte offset (decoded aside, then copied)', async () => {
    const cache = await freshCache();
    const backend = makeBackend();
    const { reader } = createRecordingReader();
    try {
      const name = streamedNames[0];
      const size = raw.get(name)!.byteLength;
      const arena = new Uint8Array(size + 1);
      const tensor = await loadTensor({ model, name }, { cache, reader, backend, target: arena.subarray(1) });
      expect(tensor.report.streamed).toBe(true);
      expect(sameBytes(arena.subarray(1), raw.get(name)!)).toBe(true);
    } finally {
      await backend.close?.();
      await reader.close();
      await cache.close();
    }
  });
});

describe('a streamed payload that fails is never used', () => {
  it('a flipped byte in a middle segment: the checksum catches it, the tensor is served raw; cacheOnly throws', async () => {
    const cache = await freshCache();
    const { blob } = entryOf(cache, 'three');
    const layout = await layoutOf(blob);
    const bytes = await readFile(blob);
    const span = computeSegmentSpans(layout, 1);
    const at = span.sm + 12345;
    bytes[at] = bytes[at]! ^ 0x01; // a mantissa bit: decodes to a plausible, wrong value
    await writeFile(blob, bytes);
    const backend = createCpuDecoder();
    const { reader } = createRecordingReader();
    try {
      const load = await loadAll(cache, { reader, backend });
      const report = load.reports.find((r) => r.name === 'three')!;
      expect(report).toMatchObject({ source: 'raw', reason: 'cache-failed', streamed: true, error: { code: 'CACHE_READ_FAILED' } });
      expect(load.totals.fromCache).toBe(TENSORS.length - 1);
      await expect(loadTensor({ model, name: 'three' }, { cache, reader, backend, cacheOnly: true })).rejects.toMatchObject({
        code: 'CACHE_READ_FAILED',
        details: expect.objectContaining({ tensor: 'three' }),
      });
    } finally {
      await reader.close();
      await cache.close();
    }
  });

  it('a read that fails mid-payload: later segments are never asked, no blob read is in flight when the raw read starts', async () => {
    const cache = await freshCache();
    const { blob } = entryOf(cache, 'three');
    const layout = await layoutOf(blob);
    const failAt = computeSegmentSpans(layout, 1).codes;
    const { reader, events, inFlightAtRawRead } = createRecordingReader((path, from) => path === blob && from === failAt);
    const backend = createCpuDecoder();
    try {
      const load = await loadAll(cache, { reader, backend, concurrency: 1 });
      const report = load.reports.find((r) => r.name === 'three')!;
      expect(report).toMatchObject({ source: 'raw', reason: 'cache-failed', error: { code: 'CACHE_READ_FAILED' } });
      const last = computeSegmentSpans(layout, 2);
      expect(events.some((e) => e.path === blob && (e.from === last.codes || e.from === last.sm))).toBe(false);
      expect(inFlightAtRawRead.every((n) => n === 0)).toBe(true);
      expect(inFlightAtRawRead.length).toBeGreaterThan(0);
    } finally {
      await reader.close();
      await cache.close();
    }
  });

  it('a blob whose header disagrees with its entry is refused before any segment decodes', async () => {
    const cache = await freshCache();
    const two = entryOf(cache, 'two');
    // A valid header that is not the entry's: its stored checksum (bytes 252..255) changed.
    const bytes = await readFile(two.blob);
    bytes[252] = bytes[252]! ^ 0xff;
    await writeFile(two.blob, bytes);
    const backend = createCpuDecoder();
    const { reader } = createRecordingReader();
    try {
      const load = await loadAll(cache, { reader, backend });
      expect(load.reports.find((r) => r.name === 'two')).toMatchObject({ source: 'raw', reason: 'cache-failed', error: { code: 'CACHE_ENTRY_MISMATCH' } });
    } finally {
      await reader.close();
      await cache.close();
    }
  });
});

it('an abort mid-payload rejects with ABORTED at once, though a read ignoring the signal stalls; the slot waits for that read', async () => {
  const cache = await freshCache();
  const { blob, entry } = entryOf(cache, 'three');
  const layout = await layoutOf(blob);
  const controller = new AbortController();
  const segment1 = computeSegmentSpans(layout, 1).codes;
  const inner = createFileReader();
  let inFlight = 0;
  let unstall: (() => void) | undefined;
  const signals: unknown[] = [];
  const reader: ByteReader = {
    async readExact(path, target, positionBytes, options) {
      signals.push(options?.signal);
      inFlight += 1;
      try {
        // Segment 1's codes span stalls (a hung mount) and ignores the signal.
        if (path === blob && positionBytes === segment1) {
          controller.abort(new Error('stop'));
          await new Promise<void>((resolve) => (unstall = resolve));
        }
        await inner.readExact(path, target, positionBytes);
      } finally {
        inFlight -= 1;
      }
    },
    close: () => inner.close(),
  };
  const pool = createStagingPool({ slotBytes: entry.compBytes + 4096, slotCount: 1 });
  try {
    const loading = loadTensor({ model, name: 'three' }, { cache, reader, pool, backend: createCpuDecoder(), signal: controller.signal });
    await expect(loading).rejects.toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'three' }) });
    // Every read was told of the load's signal (its own, following the caller's).
    expect(signals.every((signal) => signal instanceof AbortSignal)).toBe(true);
    // The stalled read may still write into the payload's slot: quarantined until it settles.
    expect(inFlight).toBeGreaterThanOrEqual(1);
    expect(pool.tryAcquire()).toBeUndefined();
    unstall!();
    const slot = await pool.acquire();
    expect(inFlight).toBe(0);
    pool.release(slot);
  } finally {
    pool.close();
    await reader.close();
    await cache.close();
  }
});

it('a backend that does not say it decodes on the calling thread is never streamed', async () => {
  const cache = await freshCache();
  const cpu = createCpuDecoder();
  const opaque: DecodeBackend = { name: 'opaque', decode: (payload, meta, out) => cpu.decode(payload, meta, out) };
  const { reader } = createRecordingReader();
  try {
    const load = await loadAll(cache, { reader, backend: opaque });
    expect(load.totals.fromCache).toBe(TENSORS.length);
    expect(load.reports.some((r) => r.streamed === true)).toBe(false);
  } finally {
    await reader.close();
    await cache.close();
  }
});
