// The sibling packages' helpers live at `@splitzip/codec/internal`, not on the main entry, whose
// API a codec user reads (it listed them beside encode and decode). Resolved by plain Node through
// package.json's `exports` (the package importing itself by name, as the kernels or the runtime
// import it), from the built dist/, in ESM and CommonJS. An error one of these helpers throws must
// be a SplitZipError to the main entry's guard and class: in ESM both entries share one chunk
// (one class); in CommonJS internal.cjs holds its own copy, recognised by the class's brand.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** The helpers moved off the main entry to ./internal (the types UnknownOption aside). */
const INTERNAL_NAMES = [
  'argumentTypeError',
  'checkNoOverlap',
  'checkReadableView',
  'describeValue',
  'findClosestName',
  'findUnknownOption',
  'formatCoverage',
  'isDetachedBuffer',
  'isUint16Array',
  'isUint8Array',
  'mallocUsesHugePages',
  'MAX_SUGGESTION_EDITS',
  'optionNamesOf',
];

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

// Run by Node itself in the package's directory, so that `@splitzip/codec` resolves through its
// own `exports` as any importer's does (vitest's resolver is not the one users get).
const PROBE = `
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
const names = ${JSON.stringify(INTERNAL_NAMES)};
const require = createRequire(pathToFileURL(process.cwd() + '/probe.cjs'));
const builds = {
  esm: { main: await import('@splitzip/codec'), internal: await import('@splitzip/codec/internal'),
         mainFile: import.meta.resolve('@splitzip/codec'), internalFile: import.meta.resolve('@splitzip/codec/internal') },
  cjs: { main: require('@splitzip/codec'), internal: require('@splitzip/codec/internal'),
         mainFile: require.resolve('@splitzip/codec'), internalFile: require.resolve('@splitzip/codec/internal') },
};
const thrown = (internal) => {
  const bytes = new Uint8Array(8);
  try { internal.checkNoOverlap(bytes, 8, bytes, 8, 'out overlaps the input'); } catch (error) { return error; }
  return undefined;
};
const report = {};
for (const [build, { main, internal, mainFile, internalFile }] of Object.entries(builds)) {
  const errors = { thrown: thrown(internal), made: internal.argumentTypeError('out', 'a Uint16Array', 5) };
  report[build] = {
    mainFile: mainFile.replace(/^.*\\/dist\\//, 'dist/'),
    internalFile: internalFile.replace(/^.*\\/dist\\//, 'dist/'),
    onMain: names.filter((name) => name in main),
    missingFromInternal: names.filter((name) => !(name in internal)),
    // For each error, against each build's main entry: instanceof, isSplitZipError with its code.
    recognised: Object.fromEntries(Object.entries(errors).map(([kind, error]) => [kind,
      Object.fromEntries(Object.entries(builds).map(([other, { main: otherMain }]) =>
        [other, [error instanceof otherMain.SplitZipError, otherMain.isSplitZipError(error, 'INVALID_ARGUMENT'), error?.name]])),
    ])),
    sameClass: errors.thrown?.constructor === main.SplitZipError,
  };
}
console.log(JSON.stringify(report));
`;

describe('@splitzip/codec/internal (the sibling packages\' helpers)', () => {
  const report = JSON.parse(
    execFileSync(process.execPath, ['--input-type=module', '-e', PROBE], { cwd: PACKAGE_ROOT, encoding: 'utf8' }),
  ) as Record<'esm' | 'cjs', {
    mainFile: string;
    internalFile: string;
    onMain: string[];
    missingFromInternal: string[];
    recognised: Record<'thrown' | 'made', Record<'esm' | 'cjs', [boolean, boolean, string]>>;
    sameClass: boolean;
  }>;
  const recognisedEverywhere = { esm: [true, true, 'SplitZipError'], cjs: [true, true, 'SplitZipError'] };

  for (const build of ['esm', 'cjs'] as const) {
    it(`${build}: the main entry has none of the helpers, ./internal has them all, each from its own dist file`, () => {
      const extension = build === 'esm' ? 'js' : 'cjs';
      expect([report[build].mainFile, report[build].internalFile]).toEqual([`dist/index.${extension}`, `dist/internal.${extension}`]);
      expect(report[build].onMain).toEqual([]);
      expect(report[build].missingFromInternal).toEqual([]);
    });

    it(`${build}: an error from an internal helper is a SplitZipError to both builds' main entries`, () => {
      expect(report[build].recognised).toEqual({ thrown: recognisedEverywhere, made: recognisedEverywhere });
    });
  }

  it('esm: both entries share one SplitZipError class; cjs: internal.cjs has its own copy, recognised by the brand', () => {
    expect(report.esm.sameClass).toBe(true);
    // If a later tsup splits CommonJS too this becomes true, and the brand is no longer what holds it.
    expect(report.cjs.sameClass).toBe(false);
  });
});
