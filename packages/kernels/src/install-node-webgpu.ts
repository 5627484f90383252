/** Outcome of putting Dawn's WebGPU (npm `webgpu`) behind `navigator.gpu` for gpu.js. */
export interface NodeWebGpuStatus {
  available: boolean;
  /** Why not, when not: the load error of the Dawn binary, or no adapter. */
  reason: string | null;
}

let installing: Promise<NodeWebGpuStatus> | null = null;

/**
 * gpu.js sees WebGPU only through `navigator.gpu`; in Node this installs Dawn's implementation
 * there (once). The `webgpu` package is imported dynamically: its native binary needs a newer
 * glibc than some hosts have, and a load failure means "webgpu unavailable", never a crash.
 */
export function installNodeWebGpu(flags: readonly string[] = []): Promise<NodeWebGpuStatus> {
  installing ??= (async () => {
    const scope = globalThis as { navigator?: { gpu?: unknown } };
    if (scope.navigator?.gpu) return { available: true, reason: null };
    let gpu: { requestAdapter(): Promise<unknown> };
    try {
      const dawn = (await import('webgpu')) as unknown as {
        create(flags: string[]): { requestAdapter(): Promise<unknown> };
        globals: Record<string, unknown>;
      };
      Object.assign(globalThis, dawn.globals);
      gpu = dawn.create([...flags]);
    } catch (error) {
      return { available: false, reason: `the webgpu package (Dawn) did not load: ${error instanceof Error ? error.message : String(error)}` };
    }
    if (scope.navigator) Object.defineProperty(scope.navigator, 'gpu', { value: gpu, configurable: true });
    else Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
    const adapter = await gpu.requestAdapter().catch(() => null);
    return adapter ? { available: true, reason: null } : { available: false, reason: 'Dawn loaded but no WebGPU adapter answered' };
  })();
  return installing;
}
