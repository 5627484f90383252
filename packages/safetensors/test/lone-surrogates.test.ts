import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseSafetensorsBytes, parseSafetensorsIndex, writeSafetensorsFile, writeShardedModel } from '../src/index.js';
import { buildRawFile, catchError, catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const entry = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}';
const file = (headerJson: string) => {
  const padded = headerJson.padEnd(Math.ceil((8 + headerJson.length) / 8) * 8 - 8, ' ');
  return buildRawFile(padded, new Uint8Array(1));
};

describe('lone surrogates (as the reference implementation: refused)', () => {
  it('writers refuse them in tensor names and metadata', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'x.safetensors');
      const tensor = (name: string) => ({ name, dtype: 'U8' as const, shape: [1], data: new Uint8Array(1) });
      for (const name of ['x\ud800', '\udc00', 'a\udfffb']) {
        const error = await catchErrorAsync(() => writeSafetensorsFile(path, [tensor(name)]));
        expectCode(error, 'WRITE_INVALID_TENSOR');
        expect(error.tensor).toBe(name);
      }
      expectCode(await catchErrorAsync(() => writeSafetensorsFile(path, [tensor('a')], { k: 'v\ud800' })), 'WRITE_INVALID_TENSOR');
      expectCode(await catchErrorAsync(() => writeSafetensorsFile(path, [tensor('a')], { ['k\udc00']: 'v' })), 'WRITE_INVALID_TENSOR');
      expectCode(await catchErrorAsync(() => writeShardedModel(join(dir, 'm'), [tensor('a\ud800')], { maxShardBytes: 1 })), 'WRITE_INVALID_TENSOR');
      // A pair is fine.
      await writeSafetensorsFile(path, [tensor('smile \ud83d\ude00')], { k: '\ud83d\ude00' });
    });
  });

  it('readers refuse a header or index whose JSON escapes one (rule 5: HEADER_INVALID_JSON / INDEX_INVALID_JSON)', async () => {
    for (const header of [`{"x\\ud800":${entry}}`, `{"\\uDC00":${entry}}`, `{"__metadata__":{"k":"\\udbff"},"a":${entry}}`]) {
      expectCode(catchError(() => parseSafetensorsBytes(file(header), 'f')), 'HEADER_INVALID_JSON');
    }
    expect(parseSafetensorsBytes(file(`{"\\ud83d\\ude00":${entry}}`), 'f').tensors[0]?.name).toBe('\ud83d\ude00');
    // An escaped backslash before "ud800" is no escape of a surrogate.
    expect(parseSafetensorsBytes(file(`{"\\\\ud800":${entry}}`), 'f').tensors[0]?.name).toBe('\\ud800');
    const index = (text: string) => new TextEncoder().encode(text);
    expectCode(catchError(() => parseSafetensorsIndex(index('{"weight_map":{"a\\ud800":"m.safetensors"}}'), 'i')), 'INDEX_INVALID_JSON');
  });
});
