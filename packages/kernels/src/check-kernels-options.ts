// createKernels' options, checked before any backend starts: a caller's bad option is an error
// on every host, never a quiet default or a backend that "failed to start".
import { checkBooleanOption, checkChoiceOption, checkIntegerOption, checkOptionKeys, checkOptionsObject, kernelsArgumentTypeError, optionNames } from './check-options.js';
import { checkWebGpuDecodeOptions, MAX_CHECKSUM_THREADS } from './create-webgpu-decoder.js';
import { KernelsError } from './errors.js';
import type { BackendRequest, CreateKernelsOptions, TestFaults } from './types.js';

export const BACKEND_REQUESTS: readonly BackendRequest[] = ['webgpu', 'webgl2', 'webgl', 'webasm', 'cpu', 'codec', 'auto'];
const CREATE_OPTIONS = optionNames<CreateKernelsOptions>({ backend: true, expectedElementCount: true, webasmThreads: true, webgpu: true, testFaults: true });
const TEST_FAULTS = optionNames<TestFaults>({ failStart: true, corruptSelfCheck: true, failLaunches: true });

/** createKernels' options, all of them, nested ones included; `undefined` stands for `{}`. */
export function checkCreateKernelsOptions(options: unknown): asserts options is CreateKernelsOptions {
  checkOptionsObject(options);
  checkOptionKeys(options, CREATE_OPTIONS, 'createKernels');
  const { backend, expectedElementCount, webasmThreads, webgpu, testFaults } = options as CreateKernelsOptions;
  checkChoiceOption(backend, 'backend', BACKEND_REQUESTS);
  // Unchecked, -5 or "x" silently steered auto's size rule.
  checkIntegerOption(expectedElementCount, 'expectedElementCount', 0);
  checkBooleanOption(webasmThreads, 'webasmThreads');
  if (testFaults !== undefined) {
    checkOptionsObject(testFaults, 'testFaults');
    checkOptionKeys(testFaults, TEST_FAULTS, 'createKernels', 'testFaults.');
    for (const name of TEST_FAULTS) checkBooleanOption((testFaults as Record<string, unknown>)[name], `testFaults.${name}`);
  }
  if (webgpu === undefined) return;
  checkWebGpuDecodeOptions(webgpu);
  const { arena, checksumThreads } = webgpu;
  // Without cross-origin isolation the global SharedArrayBuffer is undefined: `instanceof` would throw a ReferenceError.
  if (arena !== undefined && !(typeof SharedArrayBuffer !== 'undefined' && arena?.buffer instanceof SharedArrayBuffer)) {
    throw kernelsArgumentTypeError('webgpu.arena', 'a shared arena: createCodecArena(bytes, { threads: 1 or more })', arena);
  }
  checkIntegerOption(checksumThreads, 'webgpu.checksumThreads', 1, MAX_CHECKSUM_THREADS);
  if (checksumThreads !== undefined && arena !== undefined && checksumThreads > arena.threads) {
    throw new KernelsError('INVALID_ARGUMENT', `webgpu.checksumThreads must be at most the arena's threads (${arena.threads}), got ${checksumThreads}`, {
      argument: 'webgpu.checksumThreads',
      checksumThreads,
      arenaThreads: arena.threads,
    });
  }
}
