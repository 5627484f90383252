// The built runtime without its decode-thread.js beside it, as a bundle that inlined the runtime
// runs it (its output directory is not dist/).
import { cpSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
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

// A worker pool whose workers die (a bundle's broken script) decoded on the calling thread alone, every result
// right, and named itself `workers:auto` in every report as a healthy pool does. (A script that is
// missing is refused when the pool is made, since 2026-12-07: the kernels' INVALID_ARGUMENT.)
describe("backend 'workers' whose workers die", () => {
  it('a workerUrl naming no file is refused at creation', async () => {
    const { createWorkerPoolDecoder } = await import('../src/create-kernels-decoder.js');
    expect(() => createWorkerPoolDecoder({ workerUrl: new URL('file:///nonexistent/splitzip-decode-worker.js') })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', details: expect.objectContaining({ argument: 'workerUrl' }) }),
    );
  });

  it('is named for it: how many died and why', { timeout: 30_000 }, async () => {
    const { calibrateCodebook, encode, readPayloadMeta } = await import('@splitzip/codec');
    const { createWorkerPoolDecoder } = await import('../src/create-kernels-decoder.js');
    const values = new Uint16Array((1 << 20) + 5);
    for (let i = 0; i < values.length; i++) values[i] = 0x3c00 + (Math.imul(i, 2654435761) >>> 25);
    const source = encode(values, calibrateCodebook(values).codebook);
    const payload = new Uint8Array(new SharedArrayBuffer(source.length));
    payload.set(source);
    const script = join(parent, 'throwing-worker.mjs');
    writeFileSync(script, "throw new Error('worker script threw on load');\n");
    const decoder = createWorkerPoolDecoder({ threads: 1, minParallelElements: 0, workerUrl: pathToFileURL(script) });
    try {
      expect(decoder.name).toBe('workers:1');
      const out = new Uint16Array(new SharedArrayBuffer(values.length * 2));
      for (let round = 0; round < 50 && !decoder.name.includes('died'); round++) {
        await decoder.decode(payload, readPayloadMeta(payload), out);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(out).toEqual(values);
      expect(decoder.name).toMatch(/^workers:1 \(1 worker died, the calling thread decodes: worker script threw on load/);
    } finally {
      await decoder.close!();
    }
  });

  // A tensor's report took the backend's name before its decode: a worker pool that counted a death
  // at start-up in that decode (it waits for replacements once a start has failed) was named as it
  // was before, one death short. A backend whose name counts its decodes shows which was read.
  it("a tensor's report takes the backend's name after its decode", { timeout: 30_000 }, async () => {
    const { createCpuDecoder } = await import('../src/create-cpu-decoder.js');
    const { loadModel } = await import('../src/load-model.js');
    const { openCachedModel, sameBytes, tunedWeights } = await import('./fixtures.js');
    const fixture = await openCachedModel('renamed-backend', tunedWeights(['a', 'b', 'c'], 51));
    const cpu = createCpuDecoder();
    let calls = 0;
    const backend: typeof cpu = {
      get name() {
        return `counting:${calls}`;
      },
      decode(payload, meta, out, options) {
        calls++;
        return cpu.decode(payload, meta, out, options);
      },
    };
    try {
      const load = loadModel(fixture.model, fixture.cache, { backend });
      for await (const tensor of load) expect(sameBytes(tensor.data, fixture.raw.get(tensor.name)!), tensor.name).toBe(true);
      expect(load.totals.fromCache).toBe(3);
      expect(calls).toBe(3);
      // Before, the first decode's report read counting:0.
      const counts = load.reports.map((report) => Number(/^counting:(\d+)$/.exec(report.backend ?? '')?.[1]));
      expect(counts.every((count) => count >= 1), counts.join()).toBe(true);
    } finally {
      await fixture.close();
    }
  });
});
