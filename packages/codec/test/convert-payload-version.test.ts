// convertPayloadVersion against the golden payloads: every tensor frozen in versions 1, 2 and 3
// converts byte for byte into each of the others; a damaged payload is refused, never resealed.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { convertPayloadVersion, decode, readPayloadMeta } from '../src/index.js';

interface Golden {
  values: string[];
  payloadHex: string[];
}

function readGoldens(dir: string): Map<string, { values: Uint16Array; payload: Uint8Array }> {
  const url = new URL(dir, import.meta.url);
  const out = new Map<string, { values: Uint16Array; payload: Uint8Array }>();
  for (const file of readdirSync(url).filter((f) => f.endsWith('.json'))) {
    const g = JSON.parse(readFileSync(new URL(file, url), 'utf8')) as Golden;
    const hex = g.payloadHex.join('');
    const payload = new Uint8Array(hex.length / 2);
    for (let i = 0; i < payload.length; i++) payload[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
    out.set(file, { values: Uint16Array.from(g.values, (v) => parseInt(v, 16)), payload });
  }
  return out;
}

const byVersion = new Map([
  [1, readGoldens('./golden/v1/')],
  [2, readGoldens('./golden/v2/')],
  [3, readGoldens('./golden/')],
]);

describe('convertPayloadVersion', () => {
  for (const [from, goldens] of byVersion) {
    for (const [to, targets] of byVersion) {
      it(`version ${from} -> ${to}: the golden bytes of version ${to}, decoding to the same values`, () => {
        expect(goldens.size).toBe(3);
        for (const [file, { values, payload }] of goldens) {
          const converted = convertPayloadVersion(payload, to);
          expect(readPayloadMeta(converted).version, file).toBe(to);
          expect(Buffer.from(converted).equals(Buffer.from(targets.get(file)!.payload)), file).toBe(true);
          expect(Array.from(decode(converted)), file).toEqual(Array.from(values));
          expect(converted).not.toBe(payload);
        }
      });
    }
  }

  it('refuses a damaged payload (CHECKSUM_MISMATCH) and versions it cannot write (INVALID_ARGUMENT)', () => {
    const { payload } = byVersion.get(3)!.get('three-chunks.json')!;
    const meta = readPayloadMeta(payload);
    const damaged = payload.slice();
    const at = meta.layout.sm.offsetBytes + 3;
    damaged[at] = damaged[at]! ^ 0x40;
    expect(() => convertPayloadVersion(damaged, 2)).toThrow(expect.objectContaining({ code: 'CHECKSUM_MISMATCH' }));
    for (const version of [0, 4, 2.5, Number.NaN]) {
      expect(() => convertPayloadVersion(payload, version)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
    expect(() => convertPayloadVersion(payload.subarray(0, 100), 2)).toThrow(expect.objectContaining({ code: 'TRUNCATED' }));
  });
});
