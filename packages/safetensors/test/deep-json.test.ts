import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { iterateTensors, openSafetensorsModel, parseSafetensorsBytes, parseSafetensorsIndex, readTensorBytes, serializeSafetensorsHeader, writeSafetensorsFile, type SafetensorsErrorCode } from '../src/index.js';
import { MAX_QUOTED_CHARS, quoteValue } from '../src/quote-value.js';
import { buildRawFile, catchError, catchErrorAsync, expectCode, withTempDir } from './helpers.js';

// 5000 nested arrays: a 10 KB header that JSON.parse accepts, but deep enough that a recursive
// JSON.stringify/String() of it overflows the stack (both did while the error message was built).
const deep = (depth = 5000) => '['.repeat(depth) + ']'.repeat(depth);
const deepObject = (depth = 5000) => '{"a":'.repeat(depth) + '0' + '}'.repeat(depth);

const headerCases: { name: string; header: string; code: SafetensorsErrorCode }[] = [
  { name: 'shape[0] nested', header: `{"t":{"dtype":"BF16","shape":[${deep()}],"data_offsets":[0,0]}}`, code: 'TENSOR_INVALID_SHAPE' },
  { name: 'dtype nested', header: `{"t":{"dtype":${deep()},"shape":[1],"data_offsets":[0,2]}}`, code: 'TENSOR_UNKNOWN_DTYPE' },
  { name: 'dtype a nested object', header: `{"t":{"dtype":${deepObject()},"shape":[1],"data_offsets":[0,2]}}`, code: 'TENSOR_UNKNOWN_DTYPE' },
  { name: 'data_offsets[0] nested', header: `{"t":{"dtype":"BF16","shape":[1],"data_offsets":[${deep()},2]}}`, code: 'TENSOR_INVALID_OFFSETS' },
  { name: 'data_offsets[1] nested', header: `{"t":{"dtype":"BF16","shape":[1],"data_offsets":[0,${deep()}]}}`, code: 'TENSOR_INVALID_OFFSETS' },
  { name: 'metadata value nested', header: `{"__metadata__":{"k":${deep()}}}`, code: 'METADATA_INVALID' },
  { name: 'an extra entry field nested', header: `{"t":{"dtype":"BF16","shape":[1],"data_offsets":[0,2],"x":${deep()}}}`, code: 'TENSOR_ENTRY_INVALID' },
];

describe('deeply nested JSON values get their typed error (not a stack overflow) and a short message', () => {
  for (const c of headerCases) {
    it(`header: ${c.name} -> ${c.code} (in memory and from a file)`, async () => {
      const bytes = buildRawFile(c.header, new Uint8Array(2));
      const error = catchError(() => parseSafetensorsBytes(bytes, 'deep.safetensors'));
      expectCode(error, c.code);
      expect(error.file).toBe('deep.safetensors');
      expect(error.message.length).toBeLessThan(400);
      await withTempDir(async (dir) => {
        const path = join(dir, 'deep.safetensors');
        await writeFile(path, bytes);
        expectCode(await catchErrorAsync(() => openSafetensorsModel(path)), c.code);
      });
    });
  }

  it('index: nested weight_map values and shard names -> INDEX_INVALID; nested metadata is kept as stored', async () => {
    const index = (text: string) => new TextEncoder().encode(text);
    expectCode(catchError(() => parseSafetensorsIndex(index(`{"weight_map":{"t":${deep()}}}`), 'i.json')), 'INDEX_INVALID');
    expectCode(catchError(() => parseSafetensorsIndex(index(`{"weight_map":${deep()}}`), 'i.json')), 'INDEX_INVALID');
    expectCode(catchError(() => parseSafetensorsIndex(index(`{"weight_map":{},"metadata":${deep()}}`), 'i.json')), 'INDEX_INVALID');
    expect(parseSafetensorsIndex(index(`{"weight_map":{},"metadata":{"x":${deep()}}}`), 'i.json').shardNames).toEqual([]);
    await withTempDir(async (dir) => {
      await writeSafetensorsFile(join(dir, 'model.safetensors'), [{ name: 't', dtype: 'U8', shape: [1], data: new Uint8Array(1) }]);
      await writeFile(join(dir, 'model.safetensors.index.json'), `{"weight_map":{"t":${deep()}}}`);
      expectCode(await catchErrorAsync(() => openSafetensorsModel(dir)), 'INDEX_INVALID');
    });
  });

  it("a caller's nested values are quoted without recursing either", async () => {
    const nested: unknown[] = [];
    let at = nested;
    for (let i = 0; i < 100_000; i++) at.push((at = []));
    expectCode(catchError(() => serializeSafetensorsHeader([{ name: 't', dtype: nested as never, shape: [1] }])), 'WRITE_INVALID_TENSOR');
    expectCode(catchError(() => serializeSafetensorsHeader([{ name: nested as never, dtype: 'U8', shape: [1] }])), 'WRITE_INVALID_TENSOR');
    await withTempDir(async (dir) => {
      const path = join(dir, 'm.safetensors');
      await writeSafetensorsFile(path, [{ name: 't', dtype: 'U8', shape: [1], data: new Uint8Array(1) }]);
      const model = await openSafetensorsModel(path);
      try {
        expectCode(await catchErrorAsync(() => readTensorBytes(model, { name: nested } as never)), 'INVALID_ARGUMENT');
        expectCode(await catchErrorAsync(() => iterateTensors(model, { maxBufferBytes: nested as never }).next()), 'INVALID_ARGUMENT');
      } finally {
        await model.close();
      }
    });
  });
});

describe('quoteValue', () => {
  it('renders small values as JSON does', () => {
    for (const value of ['BF16', 'a"b\n', 3, -1.5, true, null, [], {}, [1, 'x', [null]], { a: [1, { b: 'c' }] }]) {
      expect(quoteValue(value)).toBe(JSON.stringify(value));
    }
    expect(quoteValue(undefined)).toBe('undefined');
    expect(quoteValue(Number.NaN)).toBe('NaN');
    expect(quoteValue(12n)).toBe('12n');
  });

  it('stays within MAX_QUOTED_CHARS for deep, wide and long values, without recursing', () => {
    const nested: unknown[] = [];
    let at = nested;
    for (let i = 0; i < 200_000; i++) at.push((at = []));
    const wide = Array.from({ length: 200_000 }, (_, i) => i);
    for (const value of [nested, JSON.parse(deep(100_000)), JSON.parse(deepObject(100_000)), wide, 'x'.repeat(10_000_000), { ['k'.repeat(1000)]: 1 }]) {
      const text = quoteValue(value);
      expect(text.length).toBeLessThanOrEqual(MAX_QUOTED_CHARS);
      expect(text.endsWith('...')).toBe(true);
    }
  });

  it("names, never reads, objects that are not plain data; a throwing getter does not escape", () => {
    expect(quoteValue(new Uint8Array(1 << 20))).toBe('Uint8Array(1048576 bytes)');
    expect(quoteValue(new Map([[1, 2]]))).toBe('<Map>');
    expect(quoteValue(() => 1)).toBe('<function>');
    const hostile = {
      get x(): never {
        throw new Error('boom');
      },
    };
    expect(quoteValue(hostile)).toBe('{"x":...');
  });
});
