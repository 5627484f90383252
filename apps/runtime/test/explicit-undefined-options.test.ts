// Options given as explicit `undefined` mean "not given", in the types (for callers compiled with
// exactOptionalPropertyTypes, which forward their own optional settings) and at run time.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { calibrateCodebook, decode, encode } from '@splitzip/codec';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, standardTensors, writeModel } from './fixtures.js';

/** The published entry points (types from each package's built declarations). */
const ENTRIES = ['@splitzip/codec', '@splitzip/kernels', '@splitzip/kernels/node', '@splitzip/safetensors', '@splitzip/store', '@splitzip/runtime', '@splitzip/builder'];

/** A program over one in-memory source file placed in `dir` (so packages resolve from there). */
function compileVirtual(dir: string, name: string, text: string, options: ts.CompilerOptions): { program: ts.Program; file: string } {
  const file = join(dir, name);
  const host = ts.createCompilerHost(options);
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.readFile = (path) => (path === file ? text : readFile(path));
  host.fileExists = (path) => path === file || fileExists(path);
  host.getSourceFile = (path, languageVersion, ...rest) =>
    path === file ? ts.createSourceFile(path, text, languageVersion, true) : getSourceFile(path, languageVersion, ...rest);
  return { program: ts.createProgram([file], options, host), file };
}

describe('explicit undefined options', () => {
  it('type-check under exactOptionalPropertyTypes for every exported *Options type of every package (found in the published declarations)', () => {
    const here = fileURLToPath(new URL('.', import.meta.url));
    const options: ts.CompilerOptions = {
      strict: true,
      exactOptionalPropertyTypes: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
    };
    // 1. Every exported type whose name ends in "Options", entry by entry.
    const imports = ENTRIES.map((entry, i) => `import type * as E${i} from '${entry}';`).join('\n');
    const lister = compileVirtual(here, 'list-options.mts', `${imports}\nexport {};\n`, options);
    const checker = lister.program.getTypeChecker();
    const found: { entry: number; name: string; typeParameters: number }[] = [];
    const listing = lister.program.getSourceFile(lister.file)!;
    expect(ts.getPreEmitDiagnostics(lister.program, listing).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([]);
    const namespaces = listing.statements.filter(ts.isImportDeclaration).map((declaration) => (declaration.importClause!.namedBindings as ts.NamespaceImport).name);
    for (const [i, entry] of ENTRIES.entries()) {
      const moduleSymbol = checker.getAliasedSymbol(checker.getSymbolAtLocation(namespaces[i]!)!);
      expect(moduleSymbol.flags & ts.SymbolFlags.ValueModule, entry).toBeTruthy();
      for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
        const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
        if (!/Options$/.test(symbol.name) || !(target.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias))) continue;
        const declaration = target.declarations?.[0] as ts.InterfaceDeclaration | ts.TypeAliasDeclaration | undefined;
        found.push({ entry: i, name: symbol.name, typeParameters: declaration?.typeParameters?.length ?? 0 });
      }
    }
    // Every package has them: the list is not empty by mistake.
    expect(new Set(found.map((f) => ENTRIES[f.entry]))).toEqual(new Set(ENTRIES));
    expect(found.length).toBeGreaterThanOrEqual(34);
    // 2. Each one: an object giving every optional property as undefined is one.
    const checks = found.map(({ entry, name, typeParameters }) => {
      const args = typeParameters > 0 ? `<${Array.from({ length: typeParameters }, () => 'unknown').join(', ')}>` : '';
      return `export const check_${entry}_${name}: Accepts<E${entry}.${name}${args}> = true;`;
    });
    const source = [
      imports,
      'type OptionalKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? K : never }[keyof T];',
      'type AllUndefined<T> = { [K in OptionalKeys<T>]-?: undefined };',
      'type Accepts<T> = AllUndefined<T> extends Pick<T, OptionalKeys<T>> ? true : false;',
      ...checks,
    ].join('\n');
    const { program } = compileVirtual(here, 'explicit-undefined-options.mts', source, options);
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
