import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SafetensorsError, findDuplicateJsonKey, openSafetensorsModel, scanJsonValue, parseSafetensorsBytes, parseSafetensorsIndex, serializeSafetensorsHeader } from '../src/index.js';
import { createRandom, randomBytes, withTempDir } from './helpers.js';

/** A valid file with a varied header: several dtypes, metadata, an empty tensor. */
function seedFile(): Uint8Array {
  const specs = [
    { name: 'model.embed.weight', dtype: 'BF16' as const, shape: [4, 3] },
    { name: 'norm', dtype: 'F32' as const, shape: [3] },
    { name: 'empty', dtype: 'I64' as const, shape: [0, 2] },
    { name: 'packed', dtype: 'F4' as const, shape: [2, 4] },
    { name: 'ids', dtype: 'I64' as const, shape: [2] },
  ];
  const header = serializeSafetensorsHeader(specs, { format: 'pt' });
  const file = new Uint8Array(header.bytes.length + header.dataBytes);
  file.set(header.bytes);
  return file;
}

function classify(run: () => unknown, stats: Map<string, number>): void {
  try {
    run();
    stats.set('valid', (stats.get('valid') ?? 0) + 1);
  } catch (error) {
    if (!(error instanceof SafetensorsError)) throw error;
    stats.set(error.code, (stats.get(error.code) ?? 0) + 1);
  }
}

describe('seeded mutation sweep', () => {
  it('random byte flips in headers only ever give SafetensorsError (10,000 mutants)', () => {
    const base = seedFile();
    const headerEnd = Number(new DataView(base.buffer).getBigUint64(0, true)) + 8;
    const random = createRandom(0x5eed);
    const stats = new Map<string, number>();
    const interesting = [0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x2d, 0x2e, 0x30, 0x39, 0x65, 0x80, 0xc3, 0xff, 0x00];
    for (let n = 0; n < 10_000; n++) {
      const mutant = base.slice();
      const flips = 1 + Math.floor(random() * 4);
      for (let f = 0; f < flips; f++) {
        const at = Math.floor(random() * headerEnd);
        const mode = random();
        if (mode < 0.4) mutant[at] = (mutant[at] ?? 0) ^ (1 << Math.floor(random() * 8));
        else if (mode < 0.8) mutant[at] = interesting[Math.floor(random() * interesting.length)] as number;
        else mutant[at] = Math.floor(random() * 256);
      }
      // Sometimes also cut the file.
      const bytes = random() < 0.1 ? mutant.subarray(0, Math.floor(random() * mutant.length)) : mutant;
      classify(() => parseSafetensorsBytes(bytes, 'mutant'), stats);
    }
    // The sweep reaches deep rules, not only the first ones.
    for (const code of ['HEADER_TOO_LARGE', 'HEADER_INVALID_JSON', 'HEADER_INVALID_UTF8', 'TENSOR_SPAN_MISMATCH', 'TENSOR_UNKNOWN_DTYPE']) {
      expect(stats.get(code) ?? 0, code).toBeGreaterThan(0);
    }
    expect(stats.size).toBeGreaterThan(8);
  });

  it('random headers of random bytes and random JSON-ish text never throw anything else', () => {
    const random = createRandom(77);
    const stats = new Map<string, number>();
    const alphabet = '{}[]":,0123456789-.eE truefalsnul\\u"dtype""shape""data_offsets""__metadata__""BF16""F4"';
    for (let n = 0; n < 3000; n++) {
      const text = Array.from({ length: Math.floor(random() * 120) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
      const header = new TextEncoder().encode(text);
      const data = randomBytes(random, Math.floor(random() * 16));
      const file = new Uint8Array(8 + header.length + data.length);
      new DataView(file.buffer).setBigUint64(0, BigInt(header.length), true);
      file.set(header, 8);
      file.set(data, 8 + header.length);
      classify(() => parseSafetensorsBytes(file, 'r'), stats);
      classify(() => parseSafetensorsIndex(header, 'r.json'), stats);
      classify(() => parseSafetensorsBytes(randomBytes(random, Math.floor(random() * 64)), 'r'), stats);
    }
    expect(stats.size).toBeGreaterThan(3);
  });

  it('mutated files on disk open or fail with SafetensorsError (300 mutants)', async () => {
    await withTempDir(async (dir) => {
      const base = seedFile();
      const headerEnd = Number(new DataView(base.buffer).getBigUint64(0, true)) + 8;
      const random = createRandom(99);
      const rejected = new Map<string, number>();
      let opened = 0;
      for (let n = 0; n < 300; n++) {
        const mutant = base.slice();
        mutant[Math.floor(random() * headerEnd)] = Math.floor(random() * 256);
        const path = join(dir, `m${n % 7}.safetensors`);
        await writeFile(path, mutant);
        try {
          const model = await openSafetensorsModel(path);
          opened++;
          await model.close();
        } catch (error) {
          if (!(error instanceof SafetensorsError)) throw error;
          rejected.set(error.code, (rejected.get(error.code) ?? 0) + 1);
        }
      }
      // The sweep must reach the checks on the file path, not only open harmless mutants.
      const rejections = [...rejected.values()].reduce((a, b) => a + b, 0);
      expect(opened + rejections).toBe(300);
      expect(rejections).toBeGreaterThan(30);
      expect(rejected.size).toBeGreaterThan(2);
    });
  });
});

describe('findDuplicateJsonKey', () => {
  it('agrees with a recursive reference on random nested JSON', () => {
    const random = createRandom(3);
    const keys = ['a', 'b', '\\u0061', 'c\\"', 'c\\u0022', '', '__proto__', 'ü'];
    const genValue = (depth: number): string => {
      const r = random();
      if (depth > 3 || r < 0.3) return ['1', '"s,{[}]"', 'null', 'true', '-2.5e3', '"\\\\"'][Math.floor(random() * 6)] as string;
      if (r < 0.6) return `[${Array.from({ length: Math.floor(random() * 4) }, () => genValue(depth + 1)).join(' , ')}]`;
      return `{${Array.from({ length: Math.floor(random() * 4) }, () => `"${keys[Math.floor(random() * keys.length)]}" : ${genValue(depth + 1)}`).join(',')}}`;
    };
    // Reference: walk the text with a tiny recursive-descent parser that records duplicates.
    const reference = (text: string): string | undefined => {
      let i = 0;
      let found: string | undefined;
      const ws = () => {
        while (/\s/.test(text[i] ?? '')) i++;
      };
      const str = (): string => {
        const start = i;
        i++;
        while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
        i++;
        return JSON.parse(text.slice(start, i)) as string;
      };
      const value = (): void => {
        ws();
        if (text[i] === '{') {
          i++;
          const seen = new Set<string>();
          ws();
          while (text[i] !== '}') {
            ws();
            const k = str();
            if (seen.has(k) && found === undefined) found = k;
            seen.add(k);
            ws();
            i++; // :
            value();
            ws();
            if (text[i] === ',') i++;
            ws();
          }
          i++;
        } else if (text[i] === '[') {
          i++;
          ws();
          while (text[i] !== ']') {
            value();
            ws();
            if (text[i] === ',') i++;
            ws();
          }
          i++;
        } else if (text[i] === '"') {
          str();
        } else {
          while (i < text.length && !/[\s,\]}]/.test(text[i] as string)) i++;
        }
      };
      value();
      return found;
    };
    let duplicates = 0;
    for (let n = 0; n < 2000; n++) {
      const text = genValue(0);
      JSON.parse(text);
      const expected = reference(text);
      const actual = findDuplicateJsonKey(text)?.key;
      expect(actual, text).toBe(expected);
      // The same value as a piece of a larger document: its end, and the same first duplicate.
      const scan = scanJsonValue(`[ ${text} ,7]`, 1);
      expect(scan.duplicate?.key, text).toBe(expected);
      if (expected === undefined) expect(scan.end, text).toBe(2 + text.length);
      if (expected !== undefined) duplicates++;
    }
    expect(duplicates).toBeGreaterThan(100);
  });

  it('scanJsonValue: ends a number, literal, string or container where it ends, and reports a duplicate inside only', () => {
    const text = '{"a": -12.5e3 ,"b":true,"c":"x\\\\\\"}\\\\","d":{"e":[{"f":1,"f":2}]},"g":{"h":1}, "h":2}';
    expect(JSON.parse(text)).toBeTruthy();
    const valueAt = (key: string) => text.indexOf(':', text.indexOf(`"${key}"`)) + 1;
    expect(text.slice(valueAt('a'), scanJsonValue(text, valueAt('a')).end)).toBe(' -12.5e3');
    expect(text.slice(valueAt('b'), scanJsonValue(text, valueAt('b')).end)).toBe('true');
    expect(JSON.parse(text.slice(valueAt('c'), scanJsonValue(text, valueAt('c')).end))).toBe('x\\"}\\');
    expect(scanJsonValue(text, valueAt('d'))).toMatchObject({ duplicate: { key: 'f', path: ['e', '[]'], position: text.indexOf('"f":2') } });
    // Keys of the object around the value are not its keys: "h" is repeated only outside it.
    expect(scanJsonValue(text, valueAt('g'))).toEqual({ end: text.indexOf(', "h"'), duplicate: undefined });
    expect(findDuplicateJsonKey(text)?.key).toBe('f');
  });

  it('is linear: a 10 MB header with 200,000 keys scans quickly', () => {
    const parts: string[] = [];
    for (let i = 0; i < 200_000; i++) parts.push(`"tensor.${i}.weight":{"dtype":"BF16","shape":[${i},2],"data_offsets":[0,0]}`);
    const text = `{${parts.join(',')}}`;
    expect(findDuplicateJsonKey(text)).toBeUndefined();
    expect(findDuplicateJsonKey(`${text.slice(0, -1)},"tensor.7.weight":1}`)?.key).toBe('tensor.7.weight');
  });
});
