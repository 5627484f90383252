import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  MAX_HEADER_BYTES,
  MAX_TENSOR_RANK,
  STAMP_CHECK_INTERVAL_MS,
  computeTensorByteSize,
  openSafetensorsModel,
  parseHeaderLengthPrefix,
  parseSafetensorsBytes,
  parseSafetensorsHeader,
  parseSafetensorsIndex,
  serializeSafetensorsHeader,
  type SafetensorsErrorCode,
} from '../src/index.js';
import { buildRawFile, catchError, catchErrorAsync, expectCode, headerText, withTempDir } from './helpers.js';

const entry = (dtype: string, shape: unknown, begin: unknown, end: unknown) => ({ dtype, shape, data_offsets: [begin, end] });

/** A valid small file: a (F32 [2]) at [0,8), b (BF16 [3]) at [8,14). */
function validFile(): Uint8Array {
  const data = Uint8Array.from({ length: 14 }, (_, i) => i + 1);
  return buildRawFile(headerText({ __metadata__: { k: 'v' }, a: entry('F32', [2], 0, 8), b: entry('BF16', [3], 8, 14) }), data);
}

interface Case {
  name: string;
  bytes: Uint8Array;
  code: SafetensorsErrorCode;
  tensor?: string;
}

const enc = (text: string) => new TextEncoder().encode(text);

/** One case per rule (and several per rule where the rule has several ways to break). */
function malformedCorpus(): Case[] {
  const data14 = new Uint8Array(14);
  const ab = (a: unknown, b: unknown) => headerText({ a, b });
  return [
    { name: 'empty file', bytes: new Uint8Array(0), code: 'HEADER_LENGTH_MISSING' },
    { name: '7-byte file', bytes: new Uint8Array(7), code: 'HEADER_LENGTH_MISSING' },
    { name: 'length 2^64-1', bytes: buildRawFile('{}', undefined, 0xffffffffffffffffn), code: 'HEADER_TOO_LARGE' },
    { name: 'length MAX+1', bytes: buildRawFile('{}', undefined, BigInt(MAX_HEADER_BYTES + 1)), code: 'HEADER_TOO_LARGE' },
    { name: 'length 2^53+1 (not exact as a double)', bytes: buildRawFile('{}', undefined, 2n ** 53n + 1n), code: 'HEADER_TOO_LARGE' },
    { name: 'length past end of file', bytes: buildRawFile('{}', undefined, 3n), code: 'HEADER_OUT_OF_BOUNDS' },
    { name: 'length = MAX but tiny file', bytes: buildRawFile('{}', undefined, BigInt(MAX_HEADER_BYTES)), code: 'HEADER_OUT_OF_BOUNDS' },
    { name: 'bad UTF-8 (lone continuation byte)', bytes: buildRawFile(Uint8Array.from([0x7b, 0x22, 0x80, 0x22, 0x3a, 0x31, 0x7d])), code: 'HEADER_INVALID_UTF8' },
    { name: 'bad UTF-8 (overlong)', bytes: buildRawFile(Uint8Array.from([0x7b, 0x7d, 0xc0, 0xaf])), code: 'HEADER_INVALID_UTF8' },
    { name: 'bad UTF-8 (surrogate)', bytes: buildRawFile(Uint8Array.from([0x7b, 0x7d, 0xed, 0xa0, 0x80])), code: 'HEADER_INVALID_UTF8' },
    { name: 'empty header', bytes: buildRawFile(''), code: 'HEADER_INVALID_JSON' },
    { name: 'not JSON', bytes: buildRawFile('{"a":'), code: 'HEADER_INVALID_JSON' },
    { name: 'trailing garbage', bytes: buildRawFile('{} x'), code: 'HEADER_INVALID_JSON' },
    { name: 'NUL padding', bytes: buildRawFile('{}\0\0\0\0\0\0'), code: 'HEADER_INVALID_JSON' },
    { name: 'BOM', bytes: buildRawFile(new Uint8Array([0xef, 0xbb, 0xbf, ...enc('{}')])), code: 'HEADER_INVALID_JSON' },
    { name: 'JSON array', bytes: buildRawFile('[]'), code: 'HEADER_NOT_OBJECT' },
    { name: 'JSON null', bytes: buildRawFile('null'), code: 'HEADER_NOT_OBJECT' },
    { name: 'JSON string', bytes: buildRawFile('"x"'), code: 'HEADER_NOT_OBJECT' },
    { name: 'JSON number', bytes: buildRawFile('12'), code: 'HEADER_NOT_OBJECT' },
    {
      name: 'duplicate tensor key',
      bytes: buildRawFile(`{"a":${JSON.stringify(entry('U8', [4], 0, 4))},"a":${JSON.stringify(entry('U8', [4], 4, 8))}}`, new Uint8Array(8)),
      code: 'HEADER_DUPLICATE_KEY',
      tensor: 'a',
    },
    {
      name: 'duplicate key spelled with an escape',
      bytes: buildRawFile(`{"ab":${JSON.stringify(entry('U8', [4], 0, 4))},"\\u0061b":${JSON.stringify(entry('U8', [4], 4, 8))}}`, new Uint8Array(8)),
      code: 'HEADER_DUPLICATE_KEY',
      tensor: 'ab',
    },
    { name: 'duplicate key inside an entry', bytes: buildRawFile('{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', new Uint8Array(1)), code: 'HEADER_DUPLICATE_KEY', tensor: 'a' },
    { name: 'duplicate __metadata__', bytes: buildRawFile('{"__metadata__":{},"__metadata__":{}}'), code: 'HEADER_DUPLICATE_KEY' },
    { name: 'metadata not an object', bytes: buildRawFile('{"__metadata__":[]}'), code: 'METADATA_INVALID' },
    { name: 'metadata value a number', bytes: buildRawFile('{"__metadata__":{"k":1}}'), code: 'METADATA_INVALID' },
    { name: 'metadata value nested', bytes: buildRawFile('{"__metadata__":{"k":{"x":"y"}}}'), code: 'METADATA_INVALID' },
    // Rule 8 comes before every entry's rules, wherever __metadata__ sits in the header.
    { name: 'metadata invalid after a broken entry', bytes: buildRawFile('{"a":{"dtype":"BF16","shape":[1]},"__metadata__":5}'), code: 'METADATA_INVALID' },
    { name: 'entry a string', bytes: buildRawFile('{"a":"x"}'), code: 'TENSOR_ENTRY_INVALID', tensor: 'a' },
    { name: 'entry missing data_offsets', bytes: buildRawFile('{"a":{"dtype":"U8","shape":[0]}}'), code: 'TENSOR_ENTRY_INVALID', tensor: 'a' },
    { name: 'entry extra field', bytes: buildRawFile('{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":1}}'), code: 'TENSOR_ENTRY_INVALID', tensor: 'a' },
    { name: 'unknown dtype', bytes: buildRawFile(headerText({ a: entry('F128', [1], 0, 16) }), new Uint8Array(16)), code: 'TENSOR_UNKNOWN_DTYPE', tensor: 'a' },
    { name: 'lower-case dtype', bytes: buildRawFile(headerText({ a: entry('bf16', [1], 0, 2) }), new Uint8Array(2)), code: 'TENSOR_UNKNOWN_DTYPE', tensor: 'a' },
    { name: 'dtype a number', bytes: buildRawFile(headerText({ a: entry(7 as unknown as string, [1], 0, 2) }), new Uint8Array(2)), code: 'TENSOR_UNKNOWN_DTYPE', tensor: 'a' },
    { name: 'negative dim', bytes: buildRawFile(headerText({ a: entry('U8', [-1], 0, 0) })), code: 'TENSOR_INVALID_SHAPE', tensor: 'a' },
    { name: 'fractional dim', bytes: buildRawFile(headerText({ a: entry('U8', [1.5], 0, 1) }), new Uint8Array(1)), code: 'TENSOR_INVALID_SHAPE', tensor: 'a' },
    { name: 'dim beyond 2^53', bytes: buildRawFile('{"a":{"dtype":"U8","shape":[9007199254740993],"data_offsets":[0,1]}}', new Uint8Array(1)), code: 'TENSOR_INVALID_SHAPE', tensor: 'a' },
    { name: 'dim a string', bytes: buildRawFile(headerText({ a: entry('U8', ['1'], 0, 1) }), new Uint8Array(1)), code: 'TENSOR_INVALID_SHAPE', tensor: 'a' },
    { name: 'shape not an array', bytes: buildRawFile(headerText({ a: entry('U8', 4, 0, 4) }), new Uint8Array(4)), code: 'TENSOR_INVALID_SHAPE', tensor: 'a' },
    { name: 'rank over the limit', bytes: buildRawFile(headerText({ a: entry('U8', new Array(MAX_TENSOR_RANK + 1).fill(1), 0, 1) }), new Uint8Array(1)), code: 'TENSOR_INVALID_SHAPE', tensor: 'a' },
    { name: 'offsets reversed', bytes: buildRawFile(headerText({ a: entry('U8', [0], 4, 0) }), new Uint8Array(4)), code: 'TENSOR_INVALID_OFFSETS', tensor: 'a' },
    { name: 'negative offset', bytes: buildRawFile(headerText({ a: entry('U8', [1], -1, 0) })), code: 'TENSOR_INVALID_OFFSETS', tensor: 'a' },
    { name: 'fractional offset', bytes: buildRawFile(headerText({ a: entry('U8', [1], 0, 0.5) })), code: 'TENSOR_INVALID_OFFSETS', tensor: 'a' },
    { name: 'three offsets', bytes: buildRawFile('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}', new Uint8Array(1)), code: 'TENSOR_INVALID_OFFSETS', tensor: 'a' },
    { name: 'offset beyond 2^53', bytes: buildRawFile('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,9007199254740993]}}', new Uint8Array(1)), code: 'TENSOR_INVALID_OFFSETS', tensor: 'a' },
    { name: 'F4 with an odd count', bytes: buildRawFile(headerText({ a: entry('F4', [3], 0, 2) }), new Uint8Array(2)), code: 'TENSOR_BITS_NOT_BYTE_ALIGNED', tensor: 'a' },
    { name: 'F6 with 5 values', bytes: buildRawFile(headerText({ a: entry('F6_E2M3', [5], 0, 4) }), new Uint8Array(4)), code: 'TENSOR_BITS_NOT_BYTE_ALIGNED', tensor: 'a' },
    { name: 'span too small', bytes: buildRawFile(ab(entry('F32', [2], 0, 7), entry('BF16', [3], 7, 13)), data14.subarray(0, 13)), code: 'TENSOR_SPAN_MISMATCH', tensor: 'a' },
    { name: 'span too large', bytes: buildRawFile(headerText({ a: entry('BF16', [3], 0, 8) }), new Uint8Array(8)), code: 'TENSOR_SPAN_MISMATCH', tensor: 'a' },
    { name: 'element count overflows 2^53', bytes: buildRawFile(headerText({ a: entry('F64', [2 ** 30, 2 ** 30, 2 ** 30], 0, 8) }), new Uint8Array(8)), code: 'TENSOR_SPAN_MISMATCH', tensor: 'a' },
    { name: 'byte size overflows although count fits', bytes: buildRawFile(headerText({ a: entry('F64', [2 ** 52], 0, 8) }), new Uint8Array(8)), code: 'TENSOR_SPAN_MISMATCH', tensor: 'a' },
    { name: 'hole at start', bytes: buildRawFile(headerText({ a: entry('U8', [4], 2, 6) }), new Uint8Array(6)), code: 'DATA_HOLE', tensor: 'a' },
    { name: 'hole between tensors', bytes: buildRawFile(ab(entry('U8', [4], 0, 4), entry('U8', [4], 6, 10)), new Uint8Array(10)), code: 'DATA_HOLE', tensor: 'b' },
    { name: 'overlap', bytes: buildRawFile(ab(entry('U8', [4], 0, 4), entry('U8', [4], 2, 6)), new Uint8Array(6)), code: 'DATA_OVERLAP', tensor: 'b' },
    { name: 'identical offsets (aliasing)', bytes: buildRawFile(ab(entry('U8', [4], 0, 4), entry('U8', [4], 0, 4)), new Uint8Array(4)), code: 'DATA_OVERLAP' },
    { name: 'empty tensor inside another', bytes: buildRawFile(ab(entry('U8', [4], 0, 4), entry('U8', [0], 2, 2)), new Uint8Array(4)), code: 'DATA_OVERLAP', tensor: 'b' },
    { name: 'trailing bytes after the last tensor', bytes: buildRawFile(headerText({ a: entry('U8', [4], 0, 4) }), new Uint8Array(5)), code: 'DATA_TRAILING_BYTES', tensor: 'a' },
    { name: 'data but no tensors', bytes: buildRawFile('{}', new Uint8Array(3)), code: 'DATA_TRAILING_BYTES' },
    { name: 'tensor past the end of the file', bytes: buildRawFile(headerText({ a: entry('U8', [4], 0, 4) }), new Uint8Array(3)), code: 'DATA_OUT_OF_BOUNDS', tensor: 'a' },
  ];
}

describe('malformed-file corpus (in memory)', () => {
  for (const c of malformedCorpus()) {
    it(`${c.name} -> ${c.code}`, () => {
      const error = catchError(() => parseSafetensorsBytes(c.bytes, 'case.safetensors'));
      expectCode(error, c.code);
      expect(error.file).toBe('case.safetensors');
      if (c.tensor !== undefined) expect(error.tensor).toBe(c.tensor);
      expect(error.message).toContain(c.code);
    });
  }

  it('covers every header/data rule code at least once', () => {
    const codes = new Set(malformedCorpus().map((c) => c.code));
    const headerCodes: SafetensorsErrorCode[] = [
      'HEADER_LENGTH_MISSING', 'HEADER_TOO_LARGE', 'HEADER_OUT_OF_BOUNDS', 'HEADER_INVALID_UTF8', 'HEADER_INVALID_JSON',
      'HEADER_NOT_OBJECT', 'HEADER_DUPLICATE_KEY', 'METADATA_INVALID', 'TENSOR_ENTRY_INVALID', 'TENSOR_UNKNOWN_DTYPE',
      'TENSOR_INVALID_SHAPE', 'TENSOR_INVALID_OFFSETS', 'TENSOR_BITS_NOT_BYTE_ALIGNED', 'TENSOR_SPAN_MISMATCH',
      'DATA_HOLE', 'DATA_OVERLAP', 'DATA_TRAILING_BYTES', 'DATA_OUT_OF_BOUNDS',
    ];
    expect(headerCodes.filter((code) => !codes.has(code))).toEqual([]);
  });

  it('offsets in errors name the tensor span and the absolute position', () => {
    const error = catchError(() => parseSafetensorsBytes(buildRawFile(headerText({ a: entry('U8', [4], 0, 4), b: entry('U8', [4], 6, 10) }), new Uint8Array(10)), 'f'));
    expect(error.offsets).toMatchObject({ begin: 6, end: 10, expected: 4, actual: 6 });
    const headerLength = headerText({ a: entry('U8', [4], 0, 4), b: entry('U8', [4], 6, 10) }).length;
    expect(error.offsets?.position).toBe(8 + headerLength + 6);
  });

  it('an overlap names both tensors (tied weights saved as one range)', () => {
    const error = catchError(() =>
      parseSafetensorsBytes(buildRawFile(headerText({ 'embed.weight': entry('BF16', [2], 0, 4), 'lm_head.weight': entry('BF16', [2], 0, 4) }), new Uint8Array(4)), 'f'),
    );
    expectCode(error, 'DATA_OVERLAP');
    expect([error.tensor, error.otherTensor].sort()).toEqual(['embed.weight', 'lm_head.weight']);
    expect(error.message).toContain('embed.weight');
    expect(error.message).toContain('lm_head.weight');
  });

  it('bytes of another kind than Uint8Array are INVALID_ARGUMENT, not a TypeError or a misread size', () => {
    const file = buildRawFile(headerText({ a: entry('U8', [4], 0, 4) }), new Uint8Array(4));
    const header = file.subarray(8, file.length - 4);
    for (const wrong of [new Uint16Array(file.buffer.slice(0, file.length & ~1)), new DataView(file.buffer), file.buffer, Array.from(file), null]) {
      expectCode(catchError(() => parseSafetensorsBytes(wrong as never, 'f')), 'INVALID_ARGUMENT');
      expectCode(catchError(() => parseHeaderLengthPrefix(wrong as never, { fileName: 'f', fileBytes: file.length })), 'INVALID_ARGUMENT');
      expectCode(catchError(() => parseSafetensorsHeader(wrong as never, { fileName: 'f', fileBytes: file.length })), 'INVALID_ARGUMENT');
    }
    // A Buffer and a Uint8ClampedArray are bytes.
    expect(parseSafetensorsBytes(Buffer.from(file), 'f').tensors).toHaveLength(1);
    expect(parseSafetensorsHeader(new Uint8ClampedArray(header) as never, { fileName: 'f', fileBytes: file.length }).tensors).toHaveLength(1);
  });

  it('rules apply in the documented order (an earlier rule wins)', () => {
    // Duplicate key and a bad dtype: the duplicate is reported (rule 7 before rule 10).
    const both = buildRawFile('{"a":{"dtype":"ZZ","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"ZZ","shape":[1],"data_offsets":[0,1]}}', new Uint8Array(1));
    expectCode(catchError(() => parseSafetensorsBytes(both, 'f')), 'HEADER_DUPLICATE_KEY');
    // Span mismatch and a hole: the span (rule 14) comes before contiguity (rule 15).
    const spanAndHole = buildRawFile(headerText({ a: entry('U8', [3], 2, 6) }), new Uint8Array(6));
    expectCode(catchError(() => parseSafetensorsBytes(spanAndHole, 'f')), 'TENSOR_SPAN_MISMATCH');
    // Header too large is reported before it is compared with the file size.
    expectCode(catchError(() => parseHeaderLengthPrefix(buildRawFile('{}', undefined, 2n ** 63n), { fileName: 'f', fileBytes: 2 ** 52 })), 'HEADER_TOO_LARGE');
  });

  it('accepts valid edge cases: no tensors, zero-size tensors at one offset, exotic names, sub-byte dtypes', () => {
    expect(parseSafetensorsBytes(buildRawFile('{}'), 'f').tensors).toEqual([]);
    expect(parseSafetensorsBytes(buildRawFile('  { }  '), 'f').tensors).toEqual([]);
    const zeros = buildRawFile(headerText({ z1: entry('F32', [0, 4], 0, 0), a: entry('U8', [2], 0, 2), z2: entry('BF16', [3, 0], 2, 2), z3: entry('BF16', [0], 2, 2) }), new Uint8Array(2));
    expect(parseSafetensorsBytes(zeros, 'f').tensors.map((t) => t.name)).toEqual(['z1', 'a', 'z2', 'z3']);
    const names = buildRawFile(headerText({ '': entry('U8', [1], 0, 1), 'ü✓': entry('U8', [1], 1, 2), 'a"b\\c': entry('U8', [1], 2, 3) }), new Uint8Array(3));
    expect(parseSafetensorsBytes(names, 'f').tensors.map((t) => t.name)).toEqual(['', 'ü✓', 'a"b\\c']);
    const sub = buildRawFile(headerText({ f4: entry('F4', [2, 3], 0, 3), f6: entry('F6_E3M2', [4], 3, 6) }), new Uint8Array(6));
    expect(parseSafetensorsBytes(sub, 'f').tensors.map((t) => t.dataOffsets)).toEqual([[0, 3], [3, 6]]);
    expect(computeTensorByteSize([2 ** 26, 2 ** 26], 'U8')).toEqual({ byteSize: 2 ** 52 });
    expect(computeTensorByteSize([2 ** 40, 2 ** 40], 'U8')).toEqual({ byteSize: undefined, reason: 'overflow' });
    expect(computeTensorByteSize([2 ** 53 - 1, 0], 'F4')).toEqual({ byteSize: 0 });
  });
});

describe('truncated files at every cut point', () => {
  it('in memory: every prefix of a valid file gives the right typed error', () => {
    const file = validFile();
    const headerLength = Number(new DataView(file.buffer).getBigUint64(0, true));
    expect(parseSafetensorsBytes(file, 'f').tensors).toHaveLength(2);
    for (let cut = 0; cut < file.length; cut++) {
      const error = catchError(() => parseSafetensorsBytes(file.slice(0, cut), 'f'));
      const expected: SafetensorsErrorCode = cut < 8 ? 'HEADER_LENGTH_MISSING' : cut < 8 + headerLength ? 'HEADER_OUT_OF_BOUNDS' : 'DATA_OUT_OF_BOUNDS';
      expectCode(error, expected);
    }
  });

  it('on disk: opening every prefix of a valid file gives the right typed error', async () => {
    await withTempDir(async (dir) => {
      const file = validFile();
      const headerLength = Number(new DataView(file.buffer).getBigUint64(0, true));
      for (let cut = 0; cut <= file.length; cut++) {
        const path = join(dir, `cut${cut}.safetensors`);
        await writeFile(path, file.subarray(0, cut));
        if (cut === file.length) {
          const model = await openSafetensorsModel(path);
          expect(model.tensors).toHaveLength(2);
          await model.close();
          continue;
        }
        const error = await catchErrorAsync(() => openSafetensorsModel(path));
        expectCode(error, cut < 8 ? 'HEADER_LENGTH_MISSING' : cut < 8 + headerLength ? 'HEADER_OUT_OF_BOUNDS' : 'DATA_OUT_OF_BOUNDS');
        expect(error.file).toBe(path);
      }
    });
  });

  it('a huge length prefix on disk is refused without allocating it', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'huge.safetensors');
      await writeFile(path, buildRawFile('{}', undefined, 0x7fffffffffffffffn));
      expectCode(await catchErrorAsync(() => openSafetensorsModel(path)), 'HEADER_TOO_LARGE');
      // Within the limit but past the file: refused before reading.
      await writeFile(path, buildRawFile('{}', undefined, 99_000_000n));
      expectCode(await catchErrorAsync(() => openSafetensorsModel(path)), 'HEADER_OUT_OF_BOUNDS');
    });
  });

  it('a file that shrinks after opening: a read past its new end gives UNEXPECTED_EOF, one inside it SHARD_CHANGED', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'shrink.safetensors');
      await writeFile(path, validFile());
      const model = await openSafetensorsModel(path);
      try {
        await (await import('node:fs/promises')).truncate(path, 8 + model.shards[0]!.headerBytes + 9);
        await new Promise((resolve) => setTimeout(resolve, STAMP_CHECK_INTERVAL_MS + 5)); // past the opening reads' check
        const { readTensorBytes } = await import('../src/index.js');
        expectCode(await catchErrorAsync(() => readTensorBytes(model, 'a')), 'SHARD_CHANGED');
        expectCode(await catchErrorAsync(() => readTensorBytes(model, 'b')), 'UNEXPECTED_EOF');
      } finally {
        await model.close();
      }
    });
  });
});

describe('header serialization', () => {
  it('refuses a header over MAX_HEADER_BYTES', () => {
    const long = 'x'.repeat(1_000_000);
    const specs = Array.from({ length: 101 }, (_, i) => ({ name: `${long}${i}`, dtype: 'U8' as const, shape: [0] }));
    expectCode(catchError(() => serializeSafetensorsHeader(specs)), 'HEADER_TOO_LARGE');
  });

  it('the header parser re-checks its length against the file size', () => {
    expectCode(catchError(() => parseSafetensorsHeader(enc('{}'), { fileName: 'f', fileBytes: 9 })), 'HEADER_OUT_OF_BOUNDS');
  });

  it('a repeated key: `tensor` is the tensor concerned (none in __metadata__), `key` the key', () => {
    const cases: [string, string | undefined, string][] = [
      ['{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', 'a', 'dtype'],
      ['{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', 'a', 'a'],
      ['{"__metadata__":{"k":"1","k":"2"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', undefined, 'k'],
      ['{"__metadata__":{},"__metadata__":{}}', undefined, '__metadata__'],
    ];
    for (const [text, tensor, key] of cases) {
      const error = catchError(() => parseSafetensorsBytes(buildRawFile(text.padEnd(Math.ceil(text.length / 8) * 8, ' '), new Uint8Array(1)), 'f'));
      expectCode(error, 'HEADER_DUPLICATE_KEY');
      expect(error.tensor).toBe(tensor);
      expect(error.key).toBe(key);
    }
    const index = (text: string) => catchError(() => parseSafetensorsIndex(new TextEncoder().encode(text), 'i'));
    const inMap = index('{"weight_map":{"a":"m.safetensors","a":"m.safetensors"}}');
    expect([inMap.code, inMap.tensor, inMap.key]).toEqual(['INDEX_DUPLICATE_KEY', 'a', 'a']);
    const inMetadata = index('{"metadata":{"total_size":1,"total_size":2},"weight_map":{}}');
    expect([inMetadata.code, inMetadata.tensor, inMetadata.key]).toEqual(['INDEX_DUPLICATE_KEY', undefined, 'total_size']);
  });

  it('a shape or data_offsets number spelled 1.0, 1e0 or -0 is refused, as by the reference implementation (rules 11, 12)', () => {
    const file = (text: string) => buildRawFile(text.padEnd(Math.ceil((8 + text.length) / 8) * 8 - 8, ' '), new Uint8Array(4));
    const cases: [string, SafetensorsErrorCode][] = [
      ['{"a":{"dtype":"U8","shape":[4.0],"data_offsets":[0,4]}}', 'TENSOR_INVALID_SHAPE'],
      ['{"a":{"dtype":"U8","shape":[2,2e0],"data_offsets":[0,4]}}', 'TENSOR_INVALID_SHAPE'],
      ['{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4E0]}}', 'TENSOR_INVALID_OFFSETS'],
      ['{"__metadata__":{"v":"1.0"},"a.1e5":{"data_offsets":[0.0,4],"dtype":"U8","shape":[4]}}', 'TENSOR_INVALID_OFFSETS'],
      // -0: serde_json reads it as a float, JSON.parse as 0 (accepted until 2026-12-06).
      ['{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,4]}}', 'TENSOR_INVALID_SHAPE'],
      ['{"a":{"dtype":"U8","shape":[4,-0],"data_offsets":[0,0]}}', 'TENSOR_INVALID_SHAPE'],
      ['{"a":{"dtype":"U8","shape":[4],"data_offsets":[-0,4]}}', 'TENSOR_INVALID_OFFSETS'],
      ['{"a-0":{"dtype":"U8","shape":[0],"data_offsets":[-0,-0]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}', 'TENSOR_INVALID_OFFSETS'],
    ];
    for (const [text, code] of cases) {
      const error = catchError(() => parseSafetensorsBytes(file(text), 'f'));
      expectCode(error, code);
      expect(error.tensor).toMatch(/^a/);
    }
    // In names and metadata strings, "1.0" and "1e5" are just text.
    const ok = parseSafetensorsBytes(file('{"__metadata__":{"v":"1.0e3","w":"-0"},"w.1e5.0-0":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}'), 'f');
    expect(ok.tensors[0]?.shape).toEqual([4]);
  });
});

