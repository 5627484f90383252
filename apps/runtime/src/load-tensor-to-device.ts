import type { DeviceDecodeResult, Kernels } from '@splitzip/kernels/node';
import type { SafetensorsDtype } from '@splitzip/safetensors';
import { CACHE_FAILURE_CODES, describeError, RuntimeError } from './errors.js';
import { checkOptionsArgument, checkSignalArgument, optionNames } from './check-load-arguments.js';
import { linkAbortSignal } from './link-abort-signal.js';
import { checkLoadTensorOptions, LOAD_TENSOR_OPTION_NAMES, type LoadTensorOptions } from './load-tensor.js';
import { resolveReboundSlice } from './resolve-rebound-slice.js';
import { resolveTensorRequest, type TensorRequest } from './resolve-tensor-request.js';
import { createCpuDecoder } from './create-cpu-decoder.js';
import { settleUnlessAborted } from './settle-unless-aborted.js';
import { checkDigest, checkOutputBuffer, createTensorReport, nameEntryAndBlob, notCachedError, prepareOutput, readRaw, settleCacheFailure, settleMiss, stagePayload, type ServeEnv, DEFAULT_SYNC_READ_MAX_BYTES } from './serve-tensor.js';
import type { LoadReason, TensorReport, TensorSource } from './types.js';

/**
 * A tensor for a GPU consumer. From the cache, `device` holds the decoded values where the kernels
 * left them (a GPUBuffer on webgpu, a texture on webgl, host memory on the CPU backends: see
 * `device.location`); the caller owns it and frees it with `device.delete()`. From the shard (not
 * cached, or the cache failed), `data` holds the raw bytes on the host, for the caller to upload.
 */
export interface DeviceTensor {
  name: string;
  /** The safetensors dtype (LoadedTensor's). */
  dtype: SafetensorsDtype;
  shape: readonly number[];
  source: TensorSource;
  reason: LoadReason;
  report: TensorReport;
  device?: DeviceDecodeResult;
  data?: Uint8Array;
}

export interface LoadTensorToDeviceOptions extends Omit<LoadTensorOptions, 'backend'> {
  /** Read blobs up to this many bytes synchronously from a local cache (see LoadModelOptions). */
  syncReadMaxBytes?: number | undefined;
  /** Kernels from `@splitzip/kernels` (`createKernels`), e.g. the webgpu backend. */
  kernels: Kernels;
}

const { backend: _backend, ...LOAD_TENSOR_SHARED_NAMES } = LOAD_TENSOR_OPTION_NAMES;
const LOAD_TENSOR_TO_DEVICE_OPTIONS = optionNames<LoadTensorToDeviceOptions>({ ...LOAD_TENSOR_SHARED_NAMES, kernels: true });

/**
 * The device-resident variant of loadTensor: the payload is staged and validated as usual, then
 * decoded by `kernels.decodeToDevice`, so the values reach the GPU in compressed form (1.5 bytes
 * per value over the bus) and stay there. `verifyDigest` reads the values back once to hash them.
 * Failures follow loadTensor's rules: reported and served raw (`data`), or thrown with `cacheOnly`.
 */
export async function loadTensorToDevice(request: TensorRequest, options: LoadTensorToDeviceOptions): Promise<DeviceTensor> {
  checkOptionsArgument(options);
  checkSignalArgument(options.signal);
  // One listener on the caller's signal for every load following it (see loadTensor).
  const linked = linkAbortSignal(options.signal);
  try {
    try {
      return await serveTensorToDevice(request, options, linked.signal);
    } catch (error) {
      // A bare slice whose entry went, bound to another entry by now: served from that one, once
      // (serveTensorToDevice resolves the request again).
      if (resolveReboundSlice(error, request, options.model, options.cache ?? undefined) === undefined) throw error;
      return await serveTensorToDevice(request, options, linked.signal);
    }
  } finally {
    linked.unlink();
  }
}

async function serveTensorToDevice(request: TensorRequest, options: LoadTensorToDeviceOptions, signal: AbortSignal | undefined): Promise<DeviceTensor> {
  const { kernels } = options;
  if (kernels === undefined || kernels === null || typeof kernels.decodeToDevice !== 'function') {
    throw new RuntimeError('DEVICE_UNAVAILABLE', 'loadTensorToDevice needs a Kernels instance (createKernels from @splitzip/kernels)', {});
  }
  // As loadTensor refuses a closed backend: each cached tensor was otherwise a quiet raw fallback.
  if (kernels.disposed === true) {
    throw new RuntimeError('INVALID_ARGUMENT', 'the Kernels instance given to loadTensorToDevice was disposed: pass an open one', { option: 'kernels' });
  }
  checkLoadTensorOptions(options, LOAD_TENSOR_TO_DEVICE_OPTIONS);
  const cache = options.cache ?? undefined; // null: no cache
  const target = resolveTensorRequest(request, options.model, cache);
  // Checked now, as loadTensor does, though only a raw fallback writes it: a wrong target must not
  // pass while the cache serves and fail once an entry goes bad.
  checkOutputBuffer(options.target, target.slice.sizeBytes, target.name);
  const env: ServeEnv = {
    cache,
    pool: options.pool,
    reader: options.reader,
    backend: createCpuDecoder(), // unused: the kernels decode
    verifyDigest: options.verifyDigest ?? false,
    cacheOnly: options.cacheOnly ?? false,
    explainMisses: options.explainMisses ?? true,
    signal,
    onStagingOverflow: () => undefined,
    syncReadMaxBytes: options.syncReadMaxBytes ?? DEFAULT_SYNC_READ_MAX_BYTES,
  };
  const { name, dtype, shape, slice } = target;
  const report = createTensorReport(target, target.dtype === 'BF16' ? 'missing' : 'dtype');
  const entry = target.entry;
  if (entry !== undefined) {
    report.key = entry.key;
    let device: DeviceDecodeResult | undefined;
    try {
      const staged = await stagePayload(env, target, entry, report);
      const decodeStartMs = performance.now();
      // A decode the load's abort left behind (a device that hangs): the staging slot it may still
      // read is set aside until it settles, and a result it still returns is freed (nobody owns it).
      let abandoned: Promise<unknown> | undefined;
      try {
        // Never waited for once the signal fires: a Kernels instance is no runtime backend (only
        // those are marked settling), and a device may hang.
        const decoding = kernels.decodeToDevice(staged.payload, { verify: false });
        device = await settleUnlessAborted(decoding, env.signal, name, (settled) => {
          abandoned = settled;
          void Promise.resolve(decoding).then(deleteQuietly, () => undefined);
        });
      } catch (error) {
        if (abandoned !== undefined) throw error; // ABORTED
        throw new RuntimeError('DECODE_FAILED', `kernels ${kernels.backend} failed to decode ${name} to the device: ${describeError(error).message}`, {
          tensor: name,
          key: entry.key,
          backend: kernels.backend,
        }, { cause: error });
      } finally {
        if (abandoned === undefined) staged.release();
        else staged.releaseWhenSettled(abandoned);
      }
      report.decodeMs += performance.now() - decodeStartMs;
      report.backend = `device:${device.backend}@${device.location}`;
      if (device.elementCount !== staged.meta.elementCount) {
        throw new RuntimeError('DECODE_FAILED', `kernels returned ${device.elementCount} values for ${name}, expected ${staged.meta.elementCount}`, {
          tensor: name,
          key: entry.key,
        });
      }
      if (env.verifyDigest) {
        let values: Uint16Array;
        // A readback the load's abort left behind (a device that hangs) is not waited for: the
        // device result it reads is freed once it settles, as a late decode's result is.
        let readback: Promise<unknown> | undefined;
        try {
          values = await settleUnlessAborted(device.toArray(), env.signal, name, (settled) => {
            readback = settled;
          });
        } catch (error) {
          if (readback !== undefined) {
            const held = device;
            device = undefined;
            void readback.then(() => deleteQuietly(held));
            throw error; // ABORTED
          }
          // The kernels disposed, or the device lost, between the decode and this readback.
          throw new RuntimeError('DECODE_FAILED', `kernels ${kernels.backend} could not read ${name} back to check its digest: ${describeError(error).message}`, {
            tensor: name,
            key: entry.key,
            backend: kernels.backend,
          }, { cause: error });
        }
        await checkDigest(env.backend, new Uint8Array(values.buffer, values.byteOffset, values.byteLength), entry, target, report, env.signal);
      }
      report.source = 'cache';
      report.reason = 'cached';
      report.bytesRead = report.blobBytesRead;
      report.bytesProduced = slice.sizeBytes;
      return { name, dtype, shape, source: 'cache', reason: 'cached', report, device };
    } catch (thrown) {
      device?.delete();
      if (!(thrown instanceof RuntimeError) || !CACHE_FAILURE_CODES.has(thrown.code)) throw thrown;
      await settleCacheFailure(env, target, entry, nameEntryAndBlob(thrown, target, entry, env.cache), report);
    }
  } else if (env.cacheOnly) {
    throw await notCachedError(target, env);
  }
  const data = prepareOutput(options.target, slice.sizeBytes, name);
  await readRaw(env, target, data, report);
  if (entry === undefined) await settleMiss(env, target, data, report);
  report.bytesRead = report.blobBytesRead + report.rawBytesRead;
  report.bytesProduced = data.byteLength;
  return { name, dtype, shape, source: 'raw', reason: report.reason, report, data };
}

/** Frees a device result that arrived after its load was aborted; a delete that throws changes nothing. */
function deleteQuietly(device: DeviceDecodeResult): void {
  try {
    device.delete();
  } catch {
    // Disposed kernels or a lost device: the memory is gone with them.
  }
}
