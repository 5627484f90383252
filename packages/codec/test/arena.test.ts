// Codec arenas (kernels in place on WebAssembly memory) and encode into a caller's buffer: the same
// bytes and values as the reference, whatever mix of arena and ordinary views.
import { afterAll, describe, expect, it } from 'vitest';
import {
  computePayloadLayout,
  createCodebook,
  createCodecArena,
  decode,
  decodeChunks,
  decodeRange,
  encode,
  readPayloadMeta,
  setCodecBackend,
  verifyPayloadChecksum,
  type CodecArena,
} from '../src/index.js';
import { mallocUsesHugePages } from '../src/internal.js';
import { BACKENDS, codeOf, useBackend } from './backends.js';
import { referenceEncode } from './reference.js';
import { sameBytes, weightsWithEscapes } from './fixtures.js';

afterAll(() => setCodecBackend('auto'));

const fixture = (n: number, seed: number) => weightsWithEscapes(n, seed, 97, 12);

describe.each(BACKENDS)('codec arena on the %s backend', (backend) => {
  // Sizes: empty, one partial group, around a 32-value group, around a 32,768-value block, odd.
  const sizes = [0, 1, 31, 32, 33, 1000, 32767, 32768, 32769, 70001];

  it('encode and decode in place give the reference bytes and the values, for every size', () => {
    useBackend(backend);
    const arena = createCodecArena(4 << 20);
    for (const n of sizes) {
      arena.reset();
      const { values, exponents } = fixture(n, n + 11);
      const expected = referenceEncode(values, exponents, 64);
      const codebook = createCodebook(exponents);
      const input = arena.allocateValues(n);
      input.set(values);
      // a dirty buffer: encode must write every byte of the payload, padding included
      const slot = arena.allocate(expected.length + 1000).fill(0xa5);
      const payload = encode(input, codebook, { chunkSize: 64, out: slot });
      expect(payload.buffer).toBe(slot.buffer);
      expect(payload.byteOffset).toBe(slot.byteOffset);
      if (!sameBytes(payload, expected)) expect.fail(`bytes differ at n=${n}`);
      expect(slot[expected.length]).toBe(0xa5); // nothing written past the payload
      const out = arena.allocateValues(n + 3).fill(0x5555);
      expect(decode(payload, out)).toBe(out);
      if (!sameBytes(out.subarray(0, n), values)) expect.fail(`decode differs at n=${n}`);
      expect(Array.from(out.subarray(n))).toEqual([0x5555, 0x5555, 0x5555]);
      out.fill(0);
      decode(payload, out, { verify: false });
      if (!sameBytes(out.subarray(0, n), values)) expect.fail(`decode(verify: false) differs at n=${n}`);
      expect(() => verifyPayloadChecksum(payload)).not.toThrow();
    }
  });

  it('mixed placements: payload or out in the arena, or in another arena', () => {
    useBackend(backend);
    const a = createCodecArena(1 << 20);
    const b = createCodecArena(1 << 20);
    const n = 40_001;
    const { values, exponents } = fixture(n, 5);
    const codebook = createCodebook(exponents);
    const expected = referenceEncode(values, exponents, 1024);
    const inA = a.allocateValues(n);
    inA.set(values);
    // arena values -> ordinary payload; ordinary values -> arena payload; arena -> other arena
    expect(sameBytes(encode(inA, codebook), expected)).toBe(true);
    const payloadA = encode(values, codebook, { out: a.allocate(expected.length) });
    expect(sameBytes(payloadA, expected)).toBe(true);
    expect(sameBytes(encode(inA, codebook, { out: b.allocate(expected.length) }), expected)).toBe(true);
    expect(sameBytes(decode(payloadA), values)).toBe(true);
    expect(sameBytes(decode(expected, b.allocateValues(n)), values)).toBe(true);
    expect(sameBytes(decode(payloadA, b.allocateValues(n)), values)).toBe(true);
  });

  it('decodeRange and decodeChunks from an arena payload into arena outputs', () => {
    useBackend(backend);
    const arena = createCodecArena(2 << 20);
    const n = 70_001;
    const { values, exponents } = fixture(n, 9);
    const payload = arena.allocate(300_000);
    const p = encode(values, createCodebook(exponents), { out: payload, chunkSize: 64 });
    for (const [start, count] of [
      [0, n],
      [1, 31],
      [33, 32768],
      [32767, 2],
      [65, 40_000],
      [n - 1, 1],
      [17, 0],
    ] as const) {
      const out = arena.allocateValues(count);
      decodeRange(p, start, count, out, { verify: false });
      if (!sameBytes(out, values.subarray(start, start + count))) expect.fail(`range ${start}+${count} differs`);
    }
    const meta = readPayloadMeta(p);
    const out = arena.allocateValues(64 * 600);
    decodeChunks(p, meta, 3, 600, out);
    expect(sameBytes(out, values.subarray(3 * 64, 603 * 64))).toBe(true);
  });

  it('reports corruption in place like anywhere else', () => {
    useBackend(backend);
    const arena = createCodecArena(1 << 20);
    const n = 5000;
    const { values, exponents } = fixture(n, 13);
    const p = encode(values, createCodebook(exponents), { out: arena.allocate(20_000) });
    for (const at of [100, 300, 256 + 1000, 2816 + 7, p.length - 1]) {
      p[at] = p[at]! ^ 0x10;
      expect(codeOf(() => decode(p, arena.allocateValues(n)))).not.toBe('none');
      p[at] = p[at]! ^ 0x10;
    }
    expect(codeOf(() => decode(p, arena.allocateValues(n)))).toBe('none');
  });
});

describe('encode into a caller buffer (out)', () => {
  it('gives the bytes of a fresh encode in any buffer, and OUTPUT_TOO_SMALL when it cannot fit', () => {
    for (const backend of BACKENDS) {
      useBackend(backend);
      const { values, exponents } = fixture(3001, 21);
      const codebook = createCodebook(exponents);
      const fresh = encode(values, codebook);
      const big = new Uint8Array(fresh.length + 17).fill(0xff);
      const p = encode(values, codebook, { out: big.subarray(1) });
      expect(sameBytes(p, fresh)).toBe(true);
      expect(big[0]).toBe(0xff);
      // large enough for the escape-free layout but not for the escapes: found after the pass
      const escapeFree = computePayloadLayout(3001, 0).totalBytes;
      expect(fresh.length).toBeGreaterThan(escapeFree);
      expect(codeOf(() => encode(values, codebook, { out: new Uint8Array(escapeFree) }))).toBe('OUTPUT_TOO_SMALL');
      expect(codeOf(() => encode(values, codebook, { out: new Uint8Array(100) }))).toBe('OUTPUT_TOO_SMALL');
      expect(codeOf(() => encode(values, codebook, { out: [] as unknown as Uint8Array }))).toBe('INVALID_ARGUMENT');
    }
  });
});

describe('createCodecArena', () => {
  it('hands out 256-byte aligned views until it is full, and reuses them after reset', () => {
    setCodecBackend('auto');
    const arena: CodecArena = createCodecArena(4096);
    expect(arena.zeroCopy).toBe(true);
    const a = arena.allocate(10);
    const b = arena.allocateValues(3);
    expect(a.length).toBe(10);
    expect(b.length).toBe(3);
    expect(b.byteOffset - a.byteOffset).toBe(256);
    expect(a.byteOffset % 256).toBe(0);
    expect(arena.usedBytes).toBe(512);
    expect(codeOf(() => arena.allocate(4096 - 512 + 1))).toBe('OUTPUT_TOO_SMALL');
    expect(arena.allocate(4096 - 512).length).toBe(3584);
    arena.reset();
    expect(arena.usedBytes).toBe(0);
    expect(arena.allocate(1).byteOffset).toBe(a.byteOffset);
    expect(codeOf(() => arena.allocate(-1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => arena.allocateValues(1.5))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => createCodecArena(-1))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => createCodecArena(2 ** 33))).toBe('INVALID_ARGUMENT');
  });

  it('release frees the latest allocation only (stack order), and refuses views of other memory', () => {
    setCodecBackend('auto');
    const arena = createCodecArena(4096);
    const a = arena.allocate(300);
    const b = arena.allocateValues(5);
    // not the latest: nothing freed
    expect(arena.release(a)).toBe(false);
    expect(arena.usedBytes).toBe(768);
    expect(arena.release(b)).toBe(true);
    expect(arena.usedBytes).toBe(512);
    // now a is the latest; a second release of b frees nothing
    expect(arena.release(b)).toBe(false);
    expect(arena.release(a)).toBe(true);
    expect(arena.usedBytes).toBe(0);
    expect(arena.allocate(1).byteOffset).toBe(a.byteOffset);
    // an allocation that fills the arena to its end
    arena.reset();
    const full = arena.allocate(4096 - 7);
    expect(arena.release(full)).toBe(true);
    expect(arena.usedBytes).toBe(0);
    // a view that does not start an allocation
    const c = arena.allocate(1024);
    expect(arena.release(c.subarray(1))).toBe(false);
    expect(arena.usedBytes).toBe(1024);
    expect(codeOf(() => arena.release(new Uint8Array(16)))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => arena.release(createCodecArena(256).allocate(1)))).toBe('INVALID_ARGUMENT');
  });

  it('release refuses part of the latest allocation (its tail or head), so no later allocation aliases it', () => {
    setCodecBackend('auto');
    const arena = createCodecArena(4096);
    const y = arena.allocate(1000);
    expect(arena.release(y.subarray(256))).toBe(false);
    expect(arena.release(y.subarray(0, 512))).toBe(false);
    expect(arena.release(new Uint8Array(arena.buffer, y.byteOffset, 1000 + 24))).toBe(false);
    expect(arena.usedBytes).toBe(1024);
    const z = arena.allocate(256);
    expect(z.byteOffset).toBeGreaterThanOrEqual(y.byteOffset + y.byteLength);
    // The whole allocation, as another view type of the same bytes, is released in stack order.
    expect(arena.release(new Uint8Array(arena.buffer, z.byteOffset, 256))).toBe(true);
    expect(arena.release(new Uint16Array(arena.buffer, y.byteOffset, 500))).toBe(true);
    expect(arena.usedBytes).toBe(0);
    // A zero-byte allocation sits at the top like any other.
    const w = arena.allocate(0);
    const v = arena.allocate(512);
    expect(arena.release(w)).toBe(false);
    expect(arena.release(v)).toBe(true);
    expect(arena.release(w)).toBe(true);
    // ... and never blocks the release of the allocation below it.
    const u = arena.allocate(300);
    arena.allocate(0);
    expect(arena.release(u)).toBe(true);
    arena.reset();
    expect(arena.release(v)).toBe(false);
  });

  it('is not zero-copy while the JS backend is forced', () => {
    const arena = createCodecArena(0);
    setCodecBackend('js');
    expect(arena.zeroCopy).toBe(false);
    setCodecBackend('auto');
    expect(arena.zeroCopy).toBe(true);
  });
});

describe('mallocUsesHugePages (where large buffers fault cheaper than in an arena)', () => {
  it('reads glibc.malloc.hugetlb=1 or 2 among the tunables, nothing else', () => {
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=1')).toBe(true);
    expect(mallocUsesHugePages('glibc.malloc.mmap_threshold=4096:glibc.malloc.hugetlb=2')).toBe(true);
    expect(mallocUsesHugePages('glibc.malloc.mmap_threshold=33554432:glibc.malloc.hugetlb=2:glibc.malloc.arena_max=1')).toBe(true);
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=0')).toBe(false);
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=10')).toBe(false);
    expect(mallocUsesHugePages('xglibc.malloc.hugetlb=1')).toBe(false);
    expect(mallocUsesHugePages('')).toBe(false);
    expect(mallocUsesHugePages(undefined)).toBe(false);
  });

  it('reads the string as glibc does: the last setting of a repeated tunable counts, an ill-formed string sets nothing', () => {
    // elf/dl-tunables.c (parse_tunables_string, glibc >= 2.39): a repeated name keeps its last value.
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=1:glibc.malloc.hugetlb=0')).toBe(false);
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=0:glibc.malloc.hugetlb=2')).toBe(true);
    // Numbers as _dl_strtoul reads them (octal after a 0, hex after 0x).
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=01')).toBe(true);
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=0x2')).toBe(true);
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=1x')).toBe(false);
    // Parts without '=' before a ':' are skipped; a '=' in a value, or a string ending in a part
    // without '=' (a trailing ':' too), makes glibc ignore the whole string.
    expect(mallocUsesHugePages('junk:glibc.malloc.hugetlb=1')).toBe(true);
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=1:junk')).toBe(false);
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=1:')).toBe(false);
    expect(mallocUsesHugePages('glibc.malloc.hugetlb=1:glibc.malloc.check=1=2')).toBe(false);
    // glibc.rtld.enable_secure=1 makes glibc ignore every tunable.
    expect(mallocUsesHugePages('glibc.rtld.enable_secure=1:glibc.malloc.hugetlb=1')).toBe(false);
    expect(mallocUsesHugePages(5 as never)).toBe(false);
  });
});
