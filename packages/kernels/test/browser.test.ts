// The GPU backends in a real browser: headless Chromium gives gpu.js WebGL2, WebGL and WebGPU
// (SwiftShader, software), so every backend is checked bit-exact in CI, which has no GPU.
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error plain JS harness shared with the bench script
import { CHROMIUM_PATH, openTestPage, startPageServer, withTimeout } from './browser/harness.mjs';

interface Report {
  backend: string;
  started: string;
  fallbackReason: string | null;
  checks: number;
  failures: string[];
  location: string;
  env: { webgl2Renderer: string | null; webgpu: { architecture?: string } | null; crossOriginIsolated: boolean };
}
interface Session {
  page: { evaluate<T, A>(fn: (arg: A) => Promise<T>, arg: A): Promise<T> };
  errors: string[];
  close(): Promise<void>;
}

const haveChromium = existsSync(CHROMIUM_PATH);
// Several launches on the GPU backends: LAUNCH_MAX_ELEMENTS (2^22) + an odd remainder.
const LARGE_COUNT = 2 ** 22 + 777;
// Above 2^24 values: the native webgpu decoder with its default slices.
const HUGE_COUNT = 2 ** 24 + 4099;
const BACKENDS: Array<[string, string]> = [
  ['webgl2', 'webgl-texture'],
  ['webgl', 'webgl-texture'],
  ['webgpu', 'webgpu-buffer'],
  ['webasm', 'host'],
  ['cpu', 'host'],
];

if (!haveChromium) {
  const message = `Chromium is missing at ${CHROMIUM_PATH}: install it with scripts/install-browser.sh`;
  if (process.env.CI) {
    it('headless Chromium is installed (required in CI for the GPU-backend checks)', () => {
      throw new Error(message);
    });
  } else {
    it.skip(`browser backends: ${message} (skipped locally; a failure when CI is set)`, () => {});
  }
} else {
  describe('browser backends (headless Chromium, SwiftShader)', () => {
    let server: { url: string; close(): Promise<void> };
    let session: Session;
    beforeAll(async () => {
      server = await startPageServer();
      session = await openTestPage(server.url);
    }, 120_000);
    afterAll(async () => {
      await session?.close();
      await server?.close();
    }, 60_000);

    for (const [backend, location] of BACKENDS) {
      it(`${backend}: decode, decodeToDevice and encode bit-exact on every input`, async () => {
        const report: Report = await withTimeout(
          session.page.evaluate(([b, n]) => (window as unknown as { runChecks(b: string, n: number): Promise<Report> }).runChecks(b, n), [
            backend,
            LARGE_COUNT,
          ] as const),
          240_000,
          `runChecks(${backend})`,
        );
        expect(session.errors).toEqual([]);
        expect(report.fallbackReason).toBeNull();
        expect(report.started).toBe(backend);
        expect(report.failures).toEqual([]);
        expect(report.checks).toBe(13 * 3);
        expect(report.location).toBe(location);
        if (backend === 'webgpu') expect(report.env.webgpu).not.toBeNull();
        if (backend === 'webasm') expect(report.env.crossOriginIsolated).toBe(true);
      }, 300_000);
    }

    it('webgpu native decoder: every upload mode across many slices and buffers, 2-D grids, buffer layout and reuse, > 2^24 values, bad payloads', async () => {
      const report: { checks: number; failures: string[]; segments: Record<string, number> } = await withTimeout(
        session.page.evaluate(
          ([n, huge]) =>
            (window as unknown as { runWebGpuChecks(n: number, huge: number): Promise<typeof report> }).runWebGpuChecks(n, huge),
          [LARGE_COUNT, HUGE_COUNT] as const,
        ),
        240_000,
        'runWebGpuChecks',
      );
      expect(session.errors).toEqual([]);
      expect(report.failures).toEqual([]);
      // 3 format-v3 segment cases x (v3, v2) x (bit-exact, last-segment corruption) = 12; the
      // same 3 cases (v3) x 2 with the checksum on the host, then on the device in 3 configurations = 24;
      // tiny readback pieces: (6 + 11 + 11) small cases x (decode, toArray) = 56.
      expect(report.checks).toBe(4 * 13 * 2 + 56 + 2 + 1 + 12 + 9 + 24);
      // 512 KiB buffers hold 64 slices of 4096 values: the large case spans several output buffers.
      for (const upload of ['write-buffer', 'mapped-staging', 'mapped-at-creation']) {
        expect(report.segments[`${upload} model-like ${LARGE_COUNT} values (several launches)`]).toBe(Math.ceil(LARGE_COUNT / 2 ** 18));
        expect(report.segments[`${upload} empty`]).toBe(0);
      }
      expect(report.segments[`2-D grids model-like ${LARGE_COUNT} values (several launches)`]).toBe(1);
      // 64 KiB buffers: the 100,003-value case spans several, so readback pieces cross segments.
      for (const pieces of ['48 bytes, 2 staging(s)', '1040 bytes, 3 staging(s)']) {
        expect(report.segments[`readback pieces of ${pieces} model-like 100,003 values (odd)`]).toBeGreaterThan(2);
      }
      expect(report.segments['readback pieces of 16 bytes, 1 staging(s) model-like 4,097 values, chunk 64']).toBe(1);
    }, 300_000);

    it('probe findings: a lost WebGL context falls back (never zeros), also once restored, concurrent webgpu encodes, dispose during a webgpu encode, decode and toArray, a lost webgpu device, GL toArray after dispose', async () => {
      const report: { checks: number; failures: string[] } = await withTimeout(
        session.page.evaluate(() => (window as unknown as { runProbeChecks(): Promise<typeof report> }).runProbeChecks(), undefined),
        120_000,
        'runProbeChecks',
      );
      expect(session.errors).toEqual([]);
      expect(report.failures).toEqual([]);
      // 2 GL backends x (3 lost-context calls + 3 after a restore + 2 toArray after dispose) + 5 webgpu checks.
      expect(report.checks).toBe(2 * 8 + 5);
    }, 180_000);
  });
}
