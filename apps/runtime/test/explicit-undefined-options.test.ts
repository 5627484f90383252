// Options given as explicit `undefined` mean "not given", in the types (for callers compiled with
// exactOptionalPropertyTypes, which forward their own optional settings) and at run time.
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { calibrateCodebook, decode, encode } from '@splitzip/codec';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, standardTensors, writeModel } from './fixtures.js';

describe('explicit undefined options', () => {
  it('type-check under exactOptionalPropertyTypes for every exported *Options type of every package', () => {
    const file = fileURLToPath(new URL('./types/explicit-undefined-options.ts', import.meta.url));
    const program = ts.createProgram([file], {
      strict: true,
      exactOptionalPropertyTypes: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).toEqual([]);
  }, 120_000);

  it('load the same bytes as options left out', async () => {
    const temp = await makeTempDir('explicit-undefined');
    try {
      const model = await writeModel(`${temp.dir}/model`, standardTensors());
      await buildCache(model, `${temp.dir}/cache`);
      const cache = await openShardCache(`${temp.dir}/cache`, { coverageMin: undefined, refreshIntervalMs: undefined, readThroughDir: undefined, s3: undefined });
      try {
        const name = model.tensors[0]!.name;
        const plain = await loadTensor({ model, name }, { cache });
        const given = await loadTensor({ model, name }, { cache, signal: undefined, target: undefined, verifyDigest: undefined, pool: undefined, backend: undefined, reader: undefined, cacheOnly: undefined });
        expect(Buffer.from(given.data).equals(Buffer.from(plain.data))).toBe(true);
        expect(given.source).toBe(plain.source);
        const loaded = new Map<string, Uint8Array>();
        await loadModel(model, cache, {
          concurrency: undefined,
          signal: undefined,
          backend: undefined,
          pool: undefined,
          allocate: undefined,
          filter: undefined,
          maxStagingBytes: undefined,
          readWindowBytes: undefined,
          verifyDigest: undefined,
          refresh: undefined,
          syncReadMaxBytes: undefined,
          onTensor: (t) => loaded.set(t.name, t.data),
        }).drain();
        expect(loaded.size).toBe(model.tensors.length);
        const pool = createStagingPool({ slotBytes: 4096, slotCount: 1, arena: undefined, shared: undefined, threads: undefined });
        expect(pool.slotCount).toBe(1);
        pool.close();
      } finally {
        await cache.close();
        await model.close();
      }
      const values = new Uint16Array(3000).map((_, i) => 0x3c00 + (i % 97));
      const { codebook } = calibrateCodebook(values);
      const payload = encode(values, codebook, { chunkSize: undefined, escapeCount: undefined });
      expect(Buffer.from(payload).equals(Buffer.from(encode(values, codebook)))).toBe(true);
      expect(decode(payload, undefined, { verify: undefined })).toEqual(values);
    } finally {
      await temp.cleanup();
    }
  });
});
