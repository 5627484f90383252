// The built runtime without its decode-thread.js beside it, as a bundle that inlined the runtime
// runs it (its output directory is not dist/).
import { cpSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as Runtime from '../src/index.js';

let parent: string;
let runtime: typeof Runtime;
let outDir: string;

beforeAll(() => {
  const packageRoot = fileURLToPath(new URL('..', import.meta.url));
  parent = mkdtempSync(join(tmpdir(), 'splitzip-bundled-'));
  outDir = join(parent, 'app', 'out');
  cpSync(join(packageRoot, 'dist'), outDir, { recursive: true });
  for (const name of readdirSync(outDir)) if (name.startsWith('decode-thread.')) rmSync(join(outDir, name));
  symlinkSync(join(packageRoot, 'node_modules'), join(parent, 'app', 'node_modules'), 'dir');
  runtime = createRequire(join(outDir, 'index.cjs'))('./index.cjs') as typeof Runtime;
});
afterAll(() => rmSync(parent, { recursive: true, force: true }));

describe('a runtime whose decode-thread.js is not beside it', () => {
  // 'auto' quietly became the plain CPU decoder: nothing told such a load from one that asked for 'cpu'.
  it("'auto' is the CPU decoder, named for why", () => {
    expect(runtime.resolveDecodeBackend('auto').name).toMatch(/^cpu:\S+ \(auto: no decode-thread\.js\)$/);
    expect(runtime.resolveDecodeBackend('cpu').name).toMatch(/^cpu:\S+$/);
  });

  // The threads failed with "Cannot find module '<out>/../dist/decode-thread.js'": a path that had
  // nothing to do with the package, and no word of what to pass.
  it("'threads' fails saying where it looked and what to pass", { timeout: 30_000 }, async () => {
    const decoder = runtime.createThreadDecoder({ threads: 1 });
    try {
      const failure = await decoder.warmUp().then(
        () => null,
        (error: Error) => error,
      );
      expect(failure).toBeInstanceOf(Error);
      expect(failure?.message).toContain(`decode-thread.js is not at ${join(outDir, 'decode-thread.js')}`);
      expect(failure?.message).toContain("import.meta.resolve('@splitzip/runtime/decode-thread')");
      expect(failure?.message).not.toContain(join(parent, 'app', 'dist'));
    } finally {
      await decoder.close();
    }
  });
});

// What the error tells a bundle to pass: the subpath must name the installed script (it had no export).
describe('the ./decode-thread subpath', () => {
  it('names the built worker script, and a thread decoder given it starts', { timeout: 30_000 }, async () => {
    const resolved = new URL(import.meta.resolve('@splitzip/runtime/decode-thread'));
    expect(resolved.href).toBe(new URL('../dist/decode-thread.js', import.meta.url).href);
    const decoder = runtime.createThreadDecoder({ threads: 1, workerUrl: resolved });
    try {
      await expect(decoder.warmUp()).resolves.toBeUndefined();
    } finally {
      await decoder.close();
    }
  });
});
