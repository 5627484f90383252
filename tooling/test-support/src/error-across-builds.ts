// A package's error class as seen from its ESM and its CommonJS build at once.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { expect } from 'vitest';

type ErrorClass = new (...args: never[]) => Error;

/**
 * Loads `dist/index.js` and `dist/index.cjs` of the package at `packageRoot` (a loader that imports
 * it while a CommonJS dependency requires it gets both) and checks that an error made by either
 * build is an instance of the other's class and passes its `is…` function, and that look-alikes do not.
 */
export async function expectErrorClassAcrossBuilds(
  packageRoot: URL,
  className: string,
  isName: string,
  make: (ErrorType: ErrorClass) => Error,
): Promise<void> {
  const esm = (await import(new URL('dist/index.js', packageRoot).href)) as Record<string, unknown>;
  const cjs = createRequire(fileURLToPath(new URL('package.json', packageRoot)))(fileURLToPath(new URL('dist/index.cjs', packageRoot))) as Record<string, unknown>;
  const builds = [esm, cjs].map((build) => ({ ErrorType: build[className] as ErrorClass, is: build[isName] as (value: unknown, code?: unknown) => boolean }));
  const [a, b] = builds as [(typeof builds)[0], (typeof builds)[0]];
  expect(a.ErrorType).not.toBe(b.ErrorType); // two classes indeed
  for (const { ErrorType } of builds) {
    // The class keeps its name in both builds: console.log (util.inspect) prints it before the message.
    expect(ErrorType.name).toBe(className);
    expect(inspect(make(ErrorType)).split('\n')[0]).toMatch(new RegExp(`^${className}\\b`));
  }
  // Also with the global Error replaced after the packages loaded (a polyfill such as core-js's
  // error-cause one, or zone.js, may do that): the class's own test must not hang on it.
  const OriginalError = globalThis.Error;
  for (const replaced of [false, true]) {
    if (replaced) globalThis.Error = class extends OriginalError {} as ErrorConstructor;
    try {
      for (const [from, to] of [
        [a, b],
        [b, a],
      ] as const) {
        const error = make(from.ErrorType);
        expect(error instanceof to.ErrorType, `global Error replaced: ${replaced}`).toBe(true);
        expect(to.is(error)).toBe(true);
        // Every package's guard narrows by code as well.
        expect(to.is(error, (error as { code?: unknown }).code)).toBe(true);
        expect(to.is(error, 'NOT_A_CODE')).toBe(false);
      }
    } finally {
      globalThis.Error = OriginalError;
    }
  }
  const lookAlike = Object.assign(new Error(make(a.ErrorType).message), { name: className, code: (make(a.ErrorType) as { code?: unknown }).code });
  for (const value of [lookAlike, { ...make(a.ErrorType) }, null, undefined, 'x', 3]) {
    expect(value instanceof a.ErrorType).toBe(false);
    expect(a.is(value)).toBe(false);
  }
}
