import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calibrateCodebook, countPayloadSegments, encode, readPayloadMeta, SEGMENT_VALUES } from '@splitzip/codec';
import { createThreadDecoder } from '../src/create-thread-decoder.js';

// The thread decoder's split paths on payloads built here: format v3 tensors spread over several
// checksum segments (each thread decodes and hashes its own), and a format v2 payload (one serial
// checksum: decoded whole on one thread).

/** xorshift32: reproducible values. */
function randomWords(count: number, seed: number): Uint16Array {
  const out = new Uint16Array(count);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < count; i += 1) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xffff;
  }
  return out;
}

/** Weight-like BF16 (exponents 118..125, so a codebook covers most) with every 7th value any bit pattern (escapes). */
function escapeHeavyWeights(count: number, seed: number): Uint16Array {
  const noise = randomWords(count, seed);
  const out = new Uint16Array(count);
  for (let i = 0; i < count; i += 1) {
    const r = noise[i] as number;
    out[i] = i % 7 === 3 ? r : ((r & 0x8000) | ((118 + (r & 7)) << 7) | ((r >>> 3) & 0x7f));
  }
  return out;
}

/** Index of the first differing value, -1 when equal (typed-array toEqual is slow at millions of values). */
function firstDifference(a: Uint16Array, b: Uint16Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  if (Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))) return -1;
  let i = 0;
  while (a[i] === b[i]) i += 1;
  return i;
}

function encodeValues(values: Uint16Array): Uint8Array {
  return encode(values, calibrateCodebook(values).codebook);
}

const decoder = createThreadDecoder({ threads: 3, splitMinValues: 1 << 16, inlineMaxValues: 1024 });
beforeAll(() => decoder.warmUp());
afterAll(async () => {
  await decoder.close?.();
});

describe('thread decoder: format v3 segments decoded and hashed in parallel', () => {
  const count = 3 * SEGMENT_VALUES + 777; // 4 segments, the last short; not a multiple of 2, 4 or 1024
  const values = escapeHeavyWeights(count, 91);
  const payload = encodeValues(values);
  const meta = readPayloadMeta(payload);

  it('splits a multi-segment tensor across the threads and is bit-exact, verified', async () => {
    expect(meta.version).toBe(3);
    expect(countPayloadSegments(payload, meta)).toBe(4);
    expect(meta.escapeCount).toBeGreaterThan(count / 10);
    const before = decoder.stats().jobs;
    const out = new Uint16Array(count).fill(0xdead);
    await decoder.decode(payload, meta, out, { verifyChecksum: true });
    expect(decoder.stats().jobs - before).toBe(3); // 4 segments over 3 threads: [0,1) [1,2) [2,4)
    expect(firstDifference(out, values)).toBe(-1);
  });

  it('all 65,536 bit patterns, shuffled over two segments, decode exactly', async () => {
    const all = new Uint16Array(SEGMENT_VALUES + 65_536);
    for (let i = 0; i < all.length; i += 1) all[i] = (i * 40_503) & 0xffff;
    const allPayload = encodeValues(all);
    const out = new Uint16Array(all.length);
    await decoder.decode(allPayload, readPayloadMeta(allPayload), out, { verifyChecksum: true });
    expect(firstDifference(out, all)).toBe(-1);
  });

  it('a flipped byte in the last segment is a checksum failure (CACHE_READ_FAILED), not data', async () => {
    const corrupt = payload.slice();
    const at = meta.layout.sm.offsetBytes + count - 5; // the sign+mantissa byte of value n-5
    corrupt[at] = (corrupt[at] as number) ^ 0x10;
    await expect(decoder.decode(corrupt, readPayloadMeta(corrupt), new Uint16Array(count), { verifyChecksum: true })).rejects.toMatchObject({
      code: 'CACHE_READ_FAILED',
      details: { codecCode: 'CHECKSUM_MISMATCH' },
    });
    // Unverified, the same bytes decode (to the wrong value there): the split without digests.
    const out = new Uint16Array(count);
    await decoder.decode(corrupt, readPayloadMeta(corrupt), out, { verifyChecksum: false });
    expect(out[count - 5]).toBe((values[count - 5] as number) ^ 0x10);
    expect(firstDifference(out.subarray(0, count - 5), values.subarray(0, count - 5))).toBe(-1);
  });

  it('decoded on the calling thread segment by segment (turns between them): exact, and a flipped byte is a checksum failure', async () => {
    const inline = createThreadDecoder({ threads: 1, inlineMaxValues: count + 1 });
    try {
      const out = new Uint16Array(count).fill(0xdead);
      await inline.decode(payload, meta, out, { verifyChecksum: true });
      expect(inline.stats()).toMatchObject({ jobs: 0, inlineDecodes: 1 });
      expect(firstDifference(out, values)).toBe(-1);
      const corrupt = payload.slice();
      const at = meta.layout.sm.offsetBytes + 5; // the first segment's: found only once the last is decoded
      corrupt[at] = (corrupt[at] as number) ^ 0x10;
      await expect(inline.decode(corrupt, readPayloadMeta(corrupt), new Uint16Array(count), { verifyChecksum: true })).rejects.toMatchObject({
        code: 'CACHE_READ_FAILED',
        details: { codecCode: 'CHECKSUM_MISMATCH' },
      });
    } finally {
      await inline.close?.();
    }
  });

  it('one segment and a tensor just above the split size stay exact', async () => {
    for (const n of [(1 << 16) + 3, SEGMENT_VALUES - 1, SEGMENT_VALUES + 1]) {
      const v = escapeHeavyWeights(n, n);
      const p = encodeValues(v);
      const out = new Uint16Array(n);
      await decoder.decode(p, readPayloadMeta(p), out, { verifyChecksum: true });
      expect(firstDifference(out, v), `n=${n}`).toBe(-1);
    }
  });
});

describe('thread decoder: format v2 payloads (caches built before v3)', () => {
  const golden = JSON.parse(readFileSync(new URL('../../../packages/codec/test/golden/v2/three-chunks.json', import.meta.url), 'utf8')) as {
    values: string[];
    payloadHex: string[];
  };
  const values = Uint16Array.from(golden.values.map((v) => Number.parseInt(v, 16)));
  const payload = Uint8Array.from(Buffer.from(golden.payloadHex.join(''), 'hex'));
  const small = createThreadDecoder({ threads: 2, splitMinValues: 1, inlineMaxValues: 1 });
  beforeAll(() => small.warmUp());
  afterAll(async () => {
    await small.close?.();
  });

  it('decode verified (whole, one thread) and unverified (split by chunks), bit-exact', async () => {
    const meta = readPayloadMeta(payload);
    expect(meta.version).toBe(2);
    for (const verifyChecksum of [true, false]) {
      const before = small.stats().jobs;
      const out = new Uint16Array(values.length);
      await small.decode(payload, meta, out, { verifyChecksum });
      expect(out).toEqual(values);
      expect(small.stats().jobs - before).toBe(verifyChecksum ? 1 : 2);
    }
  });

  it('a corrupted v2 payload is a checksum failure', async () => {
    const meta = readPayloadMeta(payload);
    const corrupt = payload.slice();
    const at = meta.layout.sm.offsetBytes + 100;
    corrupt[at] = (corrupt[at] as number) ^ 1;
    await expect(small.decode(corrupt, readPayloadMeta(corrupt), new Uint16Array(values.length), { verifyChecksum: true })).rejects.toMatchObject({
      code: 'CACHE_READ_FAILED',
    });
  });
});

describe('thread decoder start-up', () => {
  const count = (1 << 21) + 333; // above the inline bound, below the start-up one
  const values = escapeHeavyWeights(count, 5);
  const payload = encodeValues(values);
  const meta = readPayloadMeta(payload);

  it('decodes on the calling thread until a worker is ready, then on the workers', async () => {
    const fresh = createThreadDecoder({ threads: 2 });
    try {
      // Small tensors never start the workers.
      const small = escapeHeavyWeights(70_001, 6);
      const smallPayload = encodeValues(small);
      const smallOut = new Uint16Array(small.length);
      await fresh.decode(smallPayload, readPayloadMeta(smallPayload), smallOut, { verifyChecksum: true });
      expect(firstDifference(smallOut, small)).toBe(-1);
      expect(fresh.stats()).toMatchObject({ jobs: 0, inlineDecodes: 1, startedThreads: 0 });
      const out = new Uint16Array(count);
      await fresh.decode(payload, meta, out, { verifyChecksum: true }); // starts the workers; none ready yet
      expect(fresh.stats()).toMatchObject({ jobs: 0, inlineDecodes: 2, startedThreads: 2, readyThreads: 0 });
      expect(firstDifference(out, values)).toBe(-1);
      await fresh.warmUp();
      expect(fresh.stats().readyThreads).toBe(2);
      out.fill(0);
      await fresh.decode(payload, meta, out, { verifyChecksum: true });
      expect(fresh.stats()).toMatchObject({ inlineDecodes: 2 });
      expect(fresh.stats().jobs).toBeGreaterThan(0);
      expect(firstDifference(out, values)).toBe(-1);
    } finally {
      await fresh.close?.();
    }
  });

  it('startupInlineMaxValues: 0 waits for the workers; larger tensors than the limit wait too', async () => {
    for (const options of [{ startupInlineMaxValues: 0 }, { startupInlineMaxValues: count }]) {
      const fresh = createThreadDecoder({ threads: 2, ...options });
      try {
        const out = new Uint16Array(count);
        await fresh.decode(payload, meta, out, { verifyChecksum: true });
        expect(fresh.stats()).toMatchObject({ jobs: 1, inlineDecodes: 0 });
        expect(firstDifference(out, values)).toBe(-1);
      } finally {
        await fresh.close?.();
      }
    }
  });

  it('warmUp rejects with DECODE_FAILED when a worker cannot start; bad options are INVALID_ARGUMENT', async () => {
    const broken = createThreadDecoder({ threads: 1, workerUrl: new URL('data:text/javascript,throw new Error("no worker here")') });
    try {
      await expect(broken.warmUp()).rejects.toMatchObject({ code: 'DECODE_FAILED', message: expect.stringContaining('no worker here') });
    } finally {
      await broken.close?.();
    }
    expect(() => createThreadDecoder({ startupInlineMaxValues: -1 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => createThreadDecoder({ inlineMaxValues: 0.5 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('thread decoder: the calling thread decodes a share beside one worker', () => {
  const count = 2 * SEGMENT_VALUES + 4321; // 3 segments: the worker takes [0, 2), the caller [2, 3)
  const values = escapeHeavyWeights(count, 17);
  const payload = encodeValues(values);
  const meta = readPayloadMeta(payload);
  const one = createThreadDecoder({ threads: 1 });
  beforeAll(() => one.warmUp());
  afterAll(async () => {
    await one.close?.();
  });

  it('is bit-exact into a plain and a shared output, one job each, and counts the share', async () => {
    for (const out of [new Uint16Array(count), new Uint16Array(new SharedArrayBuffer(2 * count))]) {
      const before = one.stats();
      out.fill(0xbeef);
      await one.decode(payload, meta, out, { verifyChecksum: true });
      expect(firstDifference(out, values)).toBe(-1);
      expect(one.stats().jobs - before.jobs).toBe(1);
      expect(one.stats().callerShares - before.callerShares).toBe(1);
    }
  });

  it('shares only while the worker is idle: a tensor queued behind another goes to the worker whole', async () => {
    const before = one.stats();
    const outs = [new Uint16Array(count), new Uint16Array(count)];
    await Promise.all(outs.map((out) => one.decode(payload, meta, out, { verifyChecksum: true })));
    for (const out of outs) expect(firstDifference(out, values)).toBe(-1);
    expect(one.stats().jobs - before.jobs).toBe(2);
    expect(one.stats().callerShares - before.callerShares).toBe(1);
  });

  it('a flipped byte in the worker share or in the caller share is CACHE_READ_FAILED', async () => {
    for (const value of [10, count - 10]) {
      const corrupt = payload.slice();
      const at = meta.layout.sm.offsetBytes + value;
      corrupt[at] = (corrupt[at] as number) ^ 0x20;
      await expect(one.decode(corrupt, readPayloadMeta(corrupt), new Uint16Array(count), { verifyChecksum: true }), `value ${value}`).rejects.toMatchObject({
        code: 'CACHE_READ_FAILED',
        details: { codecCode: 'CHECKSUM_MISMATCH' },
      });
    }
  });

  it('shares nothing unverified, below two segments, or with callerShareMaxValues under a segment', async () => {
    const none = createThreadDecoder({ threads: 1, callerShareMaxValues: SEGMENT_VALUES - 1 });
    try {
      await none.warmUp();
      const out = new Uint16Array(count);
      await none.decode(payload, meta, out, { verifyChecksum: true });
      expect(firstDifference(out, values)).toBe(-1);
      expect(none.stats()).toMatchObject({ jobs: 1, callerShares: 0 });
    } finally {
      await none.close?.();
    }
    const before = one.stats().callerShares;
    const out = new Uint16Array(count);
    await one.decode(payload, meta, out, { verifyChecksum: false });
    expect(firstDifference(out, values)).toBe(-1);
    const single = escapeHeavyWeights(SEGMENT_VALUES, 3);
    const singlePayload = encodeValues(single);
    const singleOut = new Uint16Array(single.length);
    await one.decode(singlePayload, readPayloadMeta(singlePayload), singleOut, { verifyChecksum: true });
    expect(firstDifference(singleOut, single)).toBe(-1);
    expect(one.stats().callerShares).toBe(before);
    expect(() => createThreadDecoder({ callerShareMaxValues: -1 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});
