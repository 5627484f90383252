import { kernelsArgumentTypeError } from './check-options.js';
import { KernelsError } from './errors.js';

/** Outcome of putting Dawn's WebGPU (npm `webgpu`) behind `navigator.gpu` for gpu.js. */
export interface NodeWebGpuStatus {
  available: boolean;
  /** Why not, when not: the load error of the Dawn binary, or no adapter. */
  reason: string | null;
  /**
   * The adapter says it is a software one (`isFallbackAdapter`, on the adapter or its `info`: Mesa's
   * llvmpipe, SwiftShader, WARP), as Deno's built-in WebGPU answers on a host with no GPU: `auto`
   * offers it for decodeToDevice only (a 2^24-value decode took ~10x the codec's time on llvmpipe);
   * `backend: 'webgpu'` uses it for every call.
   */
  fallbackAdapter: boolean;
}

type AsyncMethod = (this: object, ...args: unknown[]) => Promise<unknown>;

let installing: Promise<NodeWebGpuStatus> | null = null;
/** The flags Dawn was created with (the first call's): a later call's cannot reach it. */
let installedFlags: readonly string[] = [];
/** Dawn was created (with installedFlags): false while it loads, and for good where it did not load or navigator.gpu was there. */
let dawnCreated = false;

/**
 * gpu.js sees WebGPU only through `navigator.gpu`; in Node this installs Dawn's implementation
 * there (once), through `tolerateUncapturedErrorHandler`. The `webgpu` package is imported
 * dynamically: its native binary needs a newer glibc than some hosts have, and a load failure
 * means "webgpu unavailable", never a crash. `flags` (Dawn toggles, passed to its `create`) apply
 * on the first call only; a later call with other flags is INVALID_ARGUMENT once Dawn was created
 * with the first call's (it answers after the install settled: where Dawn did not load, or a
 * `navigator.gpu` was already there, no flags were applied and it answers the install's status).
 */
export function installNodeWebGpu(flags: readonly string[] = []): Promise<NodeWebGpuStatus> {
  // A string was spread into one flag per character; flags after the install were dropped unsaid.
  if (!Array.isArray(flags) || !flags.every((flag) => typeof flag === 'string')) {
    return Promise.reject(kernelsArgumentTypeError('flags', 'an array of strings', flags));
  }
  if (installing !== null && flags.length > 0 && flags.join('\n') !== installedFlags.join('\n')) {
    // Judged once the install settled: after Dawn failed to load this answered "already installed
    // with flags []" where no Dawn was made and the status (unavailable, and why) was the answer.
    return installing.then((status) => {
      if (!dawnCreated) return status;
      throw new KernelsError(
        'INVALID_ARGUMENT',
        `Dawn is already installed with flags [${installedFlags.join(', ')}]: flags apply only to the first call (the Node createKernels makes one, with none, for webgpu and auto), so call installNodeWebGpu(flags) before it`,
        { argument: 'flags', installedFlags: [...installedFlags] },
      );
    });
  }
  if (installing === null) installedFlags = Object.freeze([...flags]);
  installing ??= (async () => {
    const scope = globalThis as { navigator?: { gpu?: { requestAdapter(): Promise<unknown> } } };
    // A runtime's own WebGPU (Deno's), or one the caller installed: asked for an adapter as Dawn's is.
    if (scope.navigator?.gpu) return describeAdapter(await requestAdapterOf(scope.navigator.gpu), 'navigator.gpu is there but');
    let gpu: { requestAdapter(): Promise<unknown> };
    try {
      const dawn = (await import('webgpu')) as unknown as {
        create(flags: string[]): { requestAdapter(): Promise<unknown> };
        globals: Record<string, unknown>;
      };
      Object.assign(globalThis, dawn.globals);
      gpu = tolerateUncapturedErrorHandler(dawn.create([...installedFlags]));
      dawnCreated = true;
    } catch (error) {
      return { available: false, reason: `the webgpu package (Dawn) did not load: ${error instanceof Error ? error.message : String(error)}`, fallbackAdapter: false };
    }
    if (scope.navigator) Object.defineProperty(scope.navigator, 'gpu', { value: gpu, configurable: true });
    else Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
    return describeAdapter(await requestAdapterOf(gpu), 'Dawn loaded but');
  })();
  return installing;
}

/**
 * How long an adapter request may take before the answer counts as none: a navigator.gpu that never
 * answers (a broken driver, a caller's stub) made every createKernels for webgpu or auto wait for ever.
 */
export const ADAPTER_REQUEST_TIMEOUT_MS = 10_000;

/**
 * `gpu.requestAdapter()`, or null where there is no such method, it throws, rejects, answers no
 * object, or has not answered after ADAPTER_REQUEST_TIMEOUT_MS: a failure here is "no WebGPU", never
 * an error cached for the process.
 */
async function requestAdapterOf(gpu: unknown): Promise<unknown> {
  const request = (gpu as { requestAdapter?: unknown } | null)?.requestAdapter;
  if (typeof request !== 'function') return null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  // Not unref'd: in a script with nothing else pending, the process exited before it fired, and
  // createKernels never answered. Cleared below once the adapter answers.
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ADAPTER_REQUEST_TIMEOUT_MS);
  });
  try {
    return await Promise.race([Promise.resolve().then(() => request.call(gpu) as unknown), timeout]);
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/** The status an adapter gives (`null`: none answered; `whose` begins that reason). */
function describeAdapter(adapter: unknown, whose: string): NodeWebGpuStatus {
  if (adapter === null || typeof adapter !== 'object') return { available: false, reason: `${whose} no WebGPU adapter answered`, fallbackAdapter: false };
  const { isFallbackAdapter, info } = adapter as { isFallbackAdapter?: unknown; info?: { isFallbackAdapter?: unknown } | null };
  return { available: true, reason: null, fallbackAdapter: isFallbackAdapter === true || info?.isFallbackAdapter === true };
}

/**
 * gpu.js (`WebGPUContext.acquire`) assigns a plain function to `device.onuncapturederror`; Dawn's
 * Node binding refuses it ("invalid value to onuncapturederror") and gpu.js's shared device
 * promise rejects, failing every webgpu kernel. So every GPUDevice reached through this `gpu`
 * (`gpu.requestAdapter()` → `adapter.requestDevice()`) gets an own `onuncapturederror` accessor
 * whose setter tries the real one and ignores a refusal (only gpu.js's logging of uncaptured
 * errors is lost; its error scopes still report). The objects stay Dawn's own, so native methods
 * keep their receivers; only these three own properties are added. Returns `gpu` itself.
 */
export function tolerateUncapturedErrorHandler<T extends object>(gpu: T): T {
  wrapAsyncMethod(gpu, 'requestAdapter', (adapter) => {
    if (adapter) wrapAsyncMethod(adapter, 'requestDevice', (device) => {
      if (device) tolerateAssignment(device, 'onuncapturederror');
    });
  });
  return gpu;
}

/** Makes `target[name](...)` call the original and pass its result to `then` before returning it. */
function wrapAsyncMethod(target: object, name: string, then: (result: object | null) => void): void {
  const original = (target as Record<string, unknown>)[name];
  if (typeof original !== 'function') return;
  defineOwn(target, name, {
    value: async function (this: object, ...args: unknown[]) {
      const result = (await (original as AsyncMethod).apply(this, args)) as object | null;
      then(result);
      return result;
    },
    writable: true,
  });
}

/** An own accessor for `target[name]` forwarding to the real one; a refused assignment is ignored. */
function tolerateAssignment(target: object, name: string): void {
  let owner: object | null = target;
  let real: PropertyDescriptor | undefined;
  while (owner && !(real = Object.getOwnPropertyDescriptor(owner, name))) owner = Object.getPrototypeOf(owner) as object | null;
  let stored: unknown = real && 'value' in real ? real.value : null;
  defineOwn(target, name, {
    get(this: object) {
      return real?.get ? real.get.call(this) : stored;
    },
    set(this: object, value: unknown) {
      try {
        if (real?.set) real.set.call(this, value);
        else stored = value;
      } catch {
        // refused by the binding (Dawn in Node): keep going without the handler
      }
    },
  });
}

function defineOwn(target: object, name: string, descriptor: PropertyDescriptor): void {
  try {
    Object.defineProperty(target, name, { ...descriptor, configurable: true, enumerable: false });
  } catch {
    // a frozen object: left as it is (gpu.js then fails as without this wrapper, and falls back)
  }
}
