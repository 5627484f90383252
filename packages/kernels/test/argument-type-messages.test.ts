// Every public entry's wrong-type refusal shows the caller's value with its type, as the codec's do
// (`out must be a Uint16Array, got object {"verify":false}`), in the message and in details.got.
// Before, the kernels said a bare "out must be a Uint16Array" (or "got an object"), and quoted a
// string whole (a 1 MB workerUrl made a 1 MB message). A value is described without reading the
// items of a large array inside it.
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { candidateBackends, createKernels, createWorkerDecoder, installNodeWebGpu, pickBackend, type Kernels, type WorkerDecoder } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);
const values = modelLikeValues(4_099, 7);
const { codebook } = calibrateCodebook(values);
const payload = codecEncode(values, codebook);

/** The longest message a refusal may make: the value shown is cut to 60 characters. */
const MAX_MESSAGE_CHARS = 400;
const huge = 'x'.repeat(1_000_000);

/** A 10M-value typed array inside an object: to be shown by its tag and length. */
const bigTensor = { name: 'w', data: new Uint16Array(10_000_000) };
const bigTensorShown = 'object {"name":"w","data":Uint16Array(length 10000000)}';

async function refusal(run: () => unknown): Promise<{ name: string; code: unknown; message: string; details: Record<string, unknown> }> {
  try {
    await run();
  } catch (error) {
    return error as never;
  }
  throw new Error('no error');
}

let kernels: Kernels;
let decoder: WorkerDecoder;
beforeAll(async () => {
  kernels = await createKernels({ backend: 'codec' });
  decoder = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 0 });
});
afterAll(async () => {
  await kernels.dispose();
  await decoder.dispose();
});

// [the call, the error class, its code, what the message shows after "got "]
const cases: [string, () => unknown, string, string, string][] = [
  ['kernels.decode(string)', () => kernels.decode('abc' as never), 'SplitZipError', 'INVALID_ARGUMENT', 'payload must be a Uint8Array, got string "abc"'],
  ['kernels.decode(payload, options as out)', () => kernels.decode(payload, { verify: false } as never), 'SplitZipError', 'INVALID_ARGUMENT', 'out must be a Uint16Array, got object {"verify":false}'],
  ['kernels.decode(payload, a 10M-value tensor object)', () => kernels.decode(payload, bigTensor as never), 'SplitZipError', 'INVALID_ARGUMENT', `out must be a Uint16Array, got ${bigTensorShown}`],
  ['kernels.decodeToDevice(array)', () => kernels.decodeToDevice([1, 2, 3] as never), 'SplitZipError', 'INVALID_ARGUMENT', 'payload must be a Uint8Array, got object [object Array] of length 3'],
  ['kernels.encode(a 10M-value tensor object)', () => kernels.encode(bigTensor as never, codebook), 'SplitZipError', 'INVALID_ARGUMENT', `values must be a Uint16Array of BF16 bit patterns, got ${bigTensorShown}`],
  ['kernels.encode(values, 5)', () => kernels.encode(values, 5 as never), 'SplitZipError', 'INVALID_CODEBOOK', 'codebook must be an object with an exponents array, got 5'],
  ['kernels.encode chunkSize string', () => kernels.encode(values, codebook, { chunkSize: '4096' as never }), 'SplitZipError', 'INVALID_ARGUMENT', 'chunkSize must be a power of two in 64..65536, got string "4096"'],
  ['kernels.decode verify: 1 MB string', () => kernels.decode(payload, undefined, { verify: huge as never }), 'KernelsError', 'INVALID_ARGUMENT', `verify must be true or false, got string "${'x'.repeat(57)}..."`],
  ['createKernels backend: 1 MB string', () => createKernels({ backend: huge as never }), 'KernelsError', 'INVALID_ARGUMENT', `backend must be one of webgpu, webgl2, webgl, webasm, cpu, codec, auto, got string "${'x'.repeat(57)}..."`],
  ['createKernels webgpu.arena a tensor object', () => createKernels({ backend: 'codec', webgpu: { arena: bigTensor as never } }), 'KernelsError', 'INVALID_ARGUMENT', `webgpu.arena must be a shared arena: createCodecArena(bytes, { threads: 1 or more }), got ${bigTensorShown}`],
  ['pickBackend available string', () => pickBackend('node', 'decode', 10, 'codec' as never), 'KernelsError', 'INVALID_ARGUMENT', 'available must be an array of backend names, got string "codec"'],
  ['candidateBackends table 5', () => candidateBackends('node', 5 as never), 'KernelsError', 'INVALID_ARGUMENT', 'table must be a measurement table like MEASURED_THROUGHPUT, got 5'],
  ['installNodeWebGpu(string)', () => installNodeWebGpu('--enable' as never), 'KernelsError', 'INVALID_ARGUMENT', 'flags must be an array of strings, got string "--enable"'],
  ['createWorkerDecoder workerUrl a tensor object', () => createWorkerDecoder({ workerUrl: bigTensor as never }), 'KernelsError', 'INVALID_ARGUMENT', `workerUrl must be a URL or a string, got ${bigTensorShown}`],
  ['createWorkerDecoder workerUrl a 1 MB data: string', () => createWorkerDecoder({ workerUrl: `data:${huge}` }), 'KernelsError', 'INVALID_ARGUMENT', `got string "data:${'x'.repeat(52)}..."`],
  ['createWorkerDecoder arena {}', () => createWorkerDecoder({ arena: {} as never }), 'KernelsError', 'INVALID_ARGUMENT', 'arena must be shared: createCodecArena(bytes, { threads }), got object {}'],
  ['workerDecoder.decode(string)', () => decoder.decode('abc' as never), 'SplitZipError', 'INVALID_ARGUMENT', 'payload must be a Uint8Array, got string "abc"'],
  ['workerDecoder.decode(payload, number[])', () => decoder.decode(payload, [1, 2] as never), 'SplitZipError', 'INVALID_ARGUMENT', 'out must be a Uint16Array, got object [object Array] of length 2'],
  [
    'workerDecoder.verifyChecksum gate not shared',
    () => decoder.verifyChecksum(payload, { gate: new Int32Array(1) }),
    'KernelsError',
    'INVALID_ARGUMENT',
    'gate must be an Int32Array(1) over a SharedArrayBuffer, got object [object Int32Array] of length 1',
  ],
];

describe('a wrong-type argument is refused showing what came, with its type', () => {
  it.each(cases)('%s', async (_name, run, errorName, code, shown) => {
    const error = await refusal(run);
    expect({ name: error.name, code: error.code }).toEqual({ name: errorName, code });
    expect(error.message).toContain(shown);
    expect(error.message.length).toBeLessThanOrEqual(MAX_MESSAGE_CHARS);
    // The value as shown is details.got too, itself cut.
    expect(typeof error.details.got).toBe('string');
    expect(error.message).toContain(`got ${error.details.got as string}`);
    expect((error.details.got as string).length).toBeLessThanOrEqual(70);
  });
});

describe('an unknown option key is quoted cut', () => {
  it('createKernels and createWorkerDecoder with a 1 MB key: the message shows 60 characters of it', async () => {
    for (const run of [() => createKernels({ [huge]: 1 } as never), () => createWorkerDecoder({ [huge]: 1 } as never)]) {
      const error = await refusal(run);
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toContain(`unknown option "${'x'.repeat(57)}..." (known: `);
      expect(error.message.length).toBeLessThanOrEqual(MAX_MESSAGE_CHARS);
      // Details too (they go into logs and --json whole): 200 characters and the ellipsis.
      expect(String((error as { details?: { argument?: unknown } }).details?.argument).length).toBeLessThanOrEqual(203);
    }
  });
});

describe('a large value inside an object is described without reading its items', () => {
  it('a 10M-item array and a 10M-value typed array inside an object (a Proxy counting reads): only the shown keys are read', async () => {
    let itemReads = 0;
    let containerReads = 0;
    const items = new Proxy(new Array<number>(10_000_000), {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) itemReads += 1;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const container = new Proxy(
      { data: new Uint16Array(10_000_000), items },
      {
        get(target, key, receiver) {
          containerReads += 1;
          return Reflect.get(target, key, receiver) as unknown;
        },
      },
    );
    const error = await refusal(() => kernels.encode(container as never, codebook));
    // Cut at 60 characters: the items' Array(length …) is cut off.
    expect(error.message).toContain('got object {"data":Uint16Array(length 10000000),"items":Array(');
    expect(itemReads).toBe(0);
    // toJSON, data, items: the object's own keys, once each, nothing more.
    expect(containerReads).toBeLessThanOrEqual(3);
    const workerError = await refusal(() => createWorkerDecoder({ workerUrl: container as never }));
    expect(workerError.message).toContain('got object {"data":Uint16Array(length 10000000),"items":Array(');
    expect(itemReads).toBe(0);
  });
});
