// Every entry of package.json's `exports` must type-check for a TypeScript importer under each
// moduleResolution a project may use. `node10` (the old "node") reads no `exports`: it finds a
// subpath's types only through `typesVersions`, so `@splitzip/codec/internal` was "Cannot find
// module" there. The fixture project sees the built package (dist/) as an installed dependency
// would: node_modules/@splitzip/codec links to this package's root; no network.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));
const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
  name: string;
  files: string[];
  exports: Record<string, unknown>;
  typesVersions?: Record<string, Record<string, string[]>>;
};

/** `@splitzip/codec`, `@splitzip/codec/internal`: every subpath with types (not ./package.json). */
const SPECIFIERS = Object.keys(manifest.exports)
  .filter((subpath) => subpath !== './package.json')
  .map((subpath) => (subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`));

/** Each resolution with the module kind it pairs with, and the fixture file (its extension picks ESM or CommonJS under node16). */
const RESOLUTIONS: { name: string; file: string; options: ts.CompilerOptions }[] = [
  { name: 'node10', file: 'index.ts', options: { module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10 } },
  { name: 'node16 (ESM)', file: 'index.mts', options: { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 } },
  { name: 'node16 (CommonJS)', file: 'index.cts', options: { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 } },
  { name: 'bundler', file: 'index.ts', options: { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler } },
];

const project = mkdtempSync(join(tmpdir(), 'codec-subpath-types-'));
mkdirSync(join(project, 'node_modules', '@splitzip'), { recursive: true });
symlinkSync(PACKAGE_ROOT, join(project, 'node_modules', '@splitzip', 'codec'), 'dir');
afterAll(() => rmSync(project, { recursive: true, force: true }));

/** tsc --noEmit's messages for a file importing every entry (namespace imports: each must resolve to a module with exports). */
function typeCheck(file: string, options: ts.CompilerOptions): string[] {
  const lines = SPECIFIERS.map((specifier, i) => `import * as entry${i} from '${specifier}';\nexport const keys${i}: string[] = Object.keys(entry${i});`);
  const path = join(project, file);
  writeFileSync(path, `${lines.join('\n')}\n`);
  const program = ts.createProgram([path], { ...options, strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts'], types: [] });
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

describe(`${manifest.name}'s entries resolve with types`, () => {
  it('covers the main entry and ./internal', () => {
    expect(SPECIFIERS).toEqual([manifest.name, `${manifest.name}/internal`]);
  });

  for (const { name, file, options } of RESOLUTIONS) {
    it(`under moduleResolution ${name}`, () => {
      expect(typeCheck(file, options)).toEqual([]);
    }, 60_000);
  }

  it('maps typesVersions only to shipped files', () => {
    const targets = Object.values(manifest.typesVersions ?? {}).flatMap((paths) => Object.values(paths).flat());
    for (const target of targets) {
      const relative = target.replace(/^\.\//, '');
      expect(manifest.files.some((entry) => relative === entry || relative.startsWith(`${entry}/`)), target).toBe(true);
      expect(() => readFileSync(join(PACKAGE_ROOT, relative)), target).not.toThrow();
    }
  });
});
