import { describe, expect, it } from 'vitest';
import {
  computeTensorByteSize,
  findDuplicateJsonKey,
  parseHeaderLengthPrefix,
  parseSafetensorsBytes,
  parseSafetensorsHeader,
  parseSafetensorsIndex,
  scanJsonValue,
  serializeSafetensorsHeader,
  type SafetensorsError,
} from '../src/header.js';
import { buildRawFile, catchError, expectCode, headerText } from './helpers.js';

// The ./header functions promise "SafetensorsError, and nothing else": a caller's bad argument is
// INVALID_ARGUMENT naming it with what it got, never a TypeError, nor reported as file damage.
const call = (fn: (...args: never[]) => unknown, ...args: unknown[]) => catchError(() => (fn as (...a: unknown[]) => unknown)(...args));

function expectInvalid(error: SafetensorsError, ...parts: string[]): void {
  expectCode(error, 'INVALID_ARGUMENT');
  for (const part of parts) expect(error.message).toContain(part);
}

describe('header entry: argument checks', () => {
  it('computeTensorByteSize refuses a bad shape (not an array, negative, fraction, too deep) and an unknown dtype, suggesting the near name', () => {
    expectInvalid(call(computeTensorByteSize, null, 'U8'), 'shape must be an array', 'got null');
    expectInvalid(call(computeTensorByteSize, [-2, 3], 'U8'), 'shape[0] must be a non-negative safe integer', 'got -2');
    expectInvalid(call(computeTensorByteSize, [2, 1.5], 'U8'), 'shape[1]', 'got 1.5');
    expectInvalid(call(computeTensorByteSize, [2 ** 53], 'U8'), 'shape[0]', 'got 9007199254740992');
    expectInvalid(call(computeTensorByteSize, new Array<number>(65).fill(1), 'U8'), 'rank 65', 'MAX_TENSOR_RANK');
    expectInvalid(call(computeTensorByteSize, [2, 3], 'XX'), 'dtype must be a safetensors dtype', 'got "XX"');
    expectInvalid(call(computeTensorByteSize, [2, 3], 'bf16'), 'got "bf16"', 'did you mean "BF16"?');
    expectInvalid(call(computeTensorByteSize, [2, 3], undefined), 'got undefined');
    // Valid arguments still work.
    expect(computeTensorByteSize([2, 3], 'F32')).toEqual({ byteSize: 24 });
  });

  it('parseHeaderLengthPrefix and parseSafetensorsHeader refuse a missing context or one whose fileBytes is no size', () => {
    const file = buildRawFile(headerText({ a: { dtype: 'U8', shape: [1], data_offsets: [0, 1] } }), new Uint8Array(1));
    const header = file.subarray(8, file.length - 1);
    expectInvalid(call(parseHeaderLengthPrefix, file), 'context must be an object { fileName, fileBytes }', 'got undefined');
    expectInvalid(call(parseSafetensorsHeader, header), 'context must be an object', 'got undefined');
    expectInvalid(call(parseSafetensorsHeader, header, { fileBytes: file.length }), 'context.fileName must be a string', 'got undefined');
    // '100' was read as a 100-byte file (HEADER_OUT_OF_BOUNDS: file damage), NaN gave "a NaN-byte file".
    for (const fileBytes of ['100', Number.NaN, -1, 1.5, 2 ** 53, undefined]) {
      expectInvalid(call(parseHeaderLengthPrefix, file, { fileName: 'x', fileBytes }), 'context.fileBytes must be a non-negative safe integer');
      const error = call(parseSafetensorsHeader, header, { fileName: 'x', fileBytes });
      expectInvalid(error, 'context.fileBytes must be a non-negative safe integer');
      expect(error.file).toBe('x');
    }
    expect(parseSafetensorsHeader(header, { fileName: 'x', fileBytes: file.length }).tensors).toHaveLength(1);
  });

  it('parseSafetensorsIndex, parseSafetensorsBytes, serializeSafetensorsHeader and the JSON scanners refuse arguments of the wrong kind', () => {
    expectInvalid(call(parseSafetensorsIndex, null, 'x'), 'bytes must be a Uint8Array', 'got null');
    expectInvalid(call(parseSafetensorsIndex, new Uint8Array(2), 7), 'fileName must be a string', 'got 7');
    expectInvalid(call(parseSafetensorsBytes, new Uint8Array(16), null), 'fileName must be a string', 'got null');
    expectInvalid(call(serializeSafetensorsHeader, [], null, 5), 'fileName must be a string', 'got 5');
    expectInvalid(call(findDuplicateJsonKey, null), 'text must be a string', 'got null');
    expectInvalid(call(scanJsonValue, null, 0), 'text must be a string');
    expectInvalid(call(scanJsonValue, '[1]', -1), 'from must be an index into text', 'got -1');
    expectInvalid(call(scanJsonValue, '[1]', 4), 'got 4');
    expect(scanJsonValue('[1]', 0).end).toBe(3);
  });
});

describe('HEADER_TOO_LARGE keeps the exact 64-bit length', () => {
  it('offsets.actualDecimal holds it as a decimal string (JSON-safe); offsets.actual stays a number, capped', () => {
    const cases: [bigint, string][] = [
      [2n ** 63n, '9223372036854775808'],
      [2n ** 64n - 1n, '18446744073709551615'],
      [100_000_001n, '100000001'],
    ];
    for (const [length, text] of cases) {
      const bytes = buildRawFile('{}', new Uint8Array(0), length);
      const error = catchError(() => parseSafetensorsBytes(bytes, 'x'));
      expectCode(error, 'HEADER_TOO_LARGE');
      expect(error.offsets?.actualDecimal).toBe(text);
      expect(BigInt(error.offsets?.actualDecimal ?? '0')).toBe(length);
      expect(error.offsets?.actual).toBe(Math.min(Number(length), Number.MAX_SAFE_INTEGER));
      expect(JSON.parse(JSON.stringify(error.offsets))).toEqual(error.offsets);
    }
    // A Git LFS pointer: its first 8 bytes read as a length.
    const pointer = new TextEncoder().encode('version https://git-lfs.github.com/spec/v1\n');
    const lfs = catchError(() => parseSafetensorsBytes(pointer, 'x'));
    expectCode(lfs, 'HEADER_TOO_LARGE');
    expect(BigInt(lfs.offsets?.actualDecimal ?? '0')).toBe(new DataView(pointer.buffer).getBigUint64(0, true));
  });
});
