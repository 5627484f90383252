// Golden payloads (test/golden/*.json) freeze the byte format: if one of these fails, the format changed.
// test/golden/v1/*.json and test/golden/v2/*.json are the same tensors in format versions 1 and 2,
// which readers still accept.
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import {
  calibrateCodebook,
  codebookFromJson,
  createCodecArena,
  decode,
  encode,
  readPayloadMeta,
  setCodecBackend,
  verifyPayloadChecksum,
} from '../src/index.js';
import { BACKENDS, useBackend } from './backends.js';
import { gaussianBf16, referenceDecode, referenceEncode } from './reference.js';

interface Golden {
  description: string;
  chunkSize: number;
  codebook: unknown;
  values: string[];
  checksum: string;
  payloadBytes: number;
  payloadHex: string[];
}

function readGoldens(dir: URL): { file: string; golden: Golden }[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => ({ file: f, golden: JSON.parse(readFileSync(new URL(f, dir), 'utf8')) as Golden }));
}
const goldens = readGoldens(new URL('./golden/', import.meta.url));
const goldensV1 = readGoldens(new URL('./golden/v1/', import.meta.url));
const goldensV2 = readGoldens(new URL('./golden/v2/', import.meta.url));

function load(g: Golden): { values: Uint16Array; payload: Uint8Array } {
  const hex = g.payloadHex.join('');
  const payload = new Uint8Array(hex.length / 2);
  for (let i = 0; i < payload.length; i++) payload[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return { values: Uint16Array.from(g.values, (v) => parseInt(v, 16)), payload };
}

afterAll(() => setCodecBackend('auto'));

it('has the golden files', () => {
  expect(goldens.map((g) => g.file).sort()).toEqual(['empty.json', 'seven-values.json', 'three-chunks.json']);
  expect(goldensV1.map((g) => g.file).sort()).toEqual(['empty.json', 'seven-values.json', 'three-chunks.json']);
  expect(goldensV2.map((g) => g.file).sort()).toEqual(['empty.json', 'seven-values.json', 'three-chunks.json']);
});

for (const [version, olderGoldens] of [
  [1, goldensV1],
  [2, goldensV2],
] as const) {
  describe.each(BACKENDS)(`version-${version} golden payloads on the %s backend`, (backend) => {
    for (const { file, golden } of olderGoldens) {
      it(`v${version}/${file}: still read, verified and decoded; re-encoding gives the current golden`, () => {
        useBackend(backend);
        const { values, payload } = load(golden);
        const meta = readPayloadMeta(payload);
        expect(meta.version).toBe(version);
        expect(meta.checksum).toBe(parseInt(golden.checksum, 16));
        expect(decode(payload)).toEqual(values);
        expect(referenceDecode(payload)).toEqual(values);
        expect(() => verifyPayloadChecksum(payload)).not.toThrow();
        // A flipped sm or codes byte fails this version's checksum (its rule is what is checked).
        if (meta.elementCount > 0) {
          for (const at of [meta.layout.sm.offsetBytes, meta.layout.codes.offsetBytes]) {
            const bad = payload.slice();
            bad[at]! ^= 1;
            expect(() => verifyPayloadChecksum(bad)).toThrow(/checksum/);
            expect(() => decode(bad)).toThrow(/checksum/);
          }
        }
        const current = goldens.find((g) => g.file === file)!.golden;
        expect(encode(values, codebookFromJson(golden.codebook), { chunkSize: golden.chunkSize })).toEqual(load(current).payload);
      });
    }
  });
}

describe.each(BACKENDS)('golden payloads on the %s backend', (backend) => {
  for (const { file, golden } of goldens) {
    it(`${file}: encode gives the frozen bytes, decode gives the values`, () => {
      useBackend(backend);
      const { values, payload } = load(golden);
      expect(payload.length).toBe(golden.payloadBytes);
      const codebook = codebookFromJson(golden.codebook);
      expect(encode(values, codebook, { chunkSize: golden.chunkSize })).toEqual(payload);
      expect(decode(payload)).toEqual(values);
      expect(referenceDecode(payload)).toEqual(values);
      const meta = readPayloadMeta(payload);
      expect(meta.checksum).toBe(parseInt(golden.checksum, 16));
      expect(meta.elementCount).toBe(values.length);
      expect(meta.compBytes).toBe(payload.length);
    });
  }
});

describe.each(BACKENDS)('version-1 and version-2 payloads from the reference encoder on the %s backend', (backend) => {
  it.each([1, 2] as const)('large v%i payloads verify and decode (fused, in blocks, in an arena); a flip anywhere in sm is caught', (version) => {
    useBackend(backend);
    for (const n of [70001, 32768 * 3 + 5]) {
      const values = gaussianBf16(n, 0.02, n);
      const exponents = calibrateCodebook(values).codebook.exponents.slice(0, 14);
      const payload = referenceEncode(values, exponents, 1024, version);
      expect(readPayloadMeta(payload).version).toBe(version);
      expect(decode(payload)).toEqual(values);
      verifyPayloadChecksum(payload);
      const arena = createCodecArena(payload.length + 2 * n + 4096);
      const slot = arena.allocate(payload.length);
      slot.set(payload);
      const out = arena.allocateValues(n);
      decode(slot, out);
      expect(out).toEqual(values);
      const sm = readPayloadMeta(payload).layout.sm.offsetBytes;
      for (const at of [sm, sm + 17, sm + n - 1, sm + 40000]) {
        const bad = payload.slice();
        bad[at]! ^= 0x20;
        expect(() => decode(bad), `flip at ${at}`).toThrow(/checksum/);
      }
    }
  });
});

it('seven-values.json has the layout FORMAT.md describes (checked by hand)', () => {
  const { payload } = load(goldens.find((g) => g.file === 'seven-values.json')!.golden);
  const dv = new DataView(payload.buffer);
  expect(Array.from(payload.subarray(0, 8))).toEqual([0x53, 0x5a, 0x42, 0x46, 3, 0, 0, 1]); // magic, v3, 256
  expect(dv.getUint32(12, true)).toBe(64);
  expect(Number(dv.getBigUint64(16, true))).toBe(7);
  expect(Number(dv.getBigUint64(24, true))).toBe(3); // 2.0, +0 and NaN escape
  expect(dv.getUint32(32, true)).toBe(1);
  expect(Array.from(payload.subarray(36, 42))).toEqual([2, 0, 0, 0, 127, 126]);
  const sections = [0, 1, 2, 3, 4].map((s) => [Number(dv.getBigUint64(56 + 16 * s, true)), Number(dv.getBigUint64(64 + 16 * s, true))]);
  expect(sections).toEqual([
    [256, 4],
    [512, 7],
    [768, 8],
    [1024, 6],
    [1280, 3],
  ]);
  expect(Number(dv.getBigUint64(136, true))).toBe(1536);
  // codes: 1 -> 0, -1 -> 0, 0.5 -> 1, escapes -> 0, -0.75 -> 1, final high nibble 0
  expect(Array.from(payload.subarray(256, 260))).toEqual([0x00, 0x01, 0x00, 0x01]);
  // sm: sign in bit 7, mantissa in bits 6..0
  expect(Array.from(payload.subarray(512, 519))).toEqual([0x00, 0x80, 0x00, 0x00, 0x00, 0x40, 0xc0]);
  expect([dv.getUint32(768, true), dv.getUint32(772, true)]).toEqual([0, 3]);
  expect([dv.getUint16(1024, true), dv.getUint16(1026, true), dv.getUint16(1028, true)]).toEqual([3, 4, 5]);
  expect(Array.from(payload.subarray(1280, 1283))).toEqual([128, 0, 255]);
});
