import { describeValue } from '@splitzip/codec/internal';
import { isSafetensorsError, openSafetensorsModel, type ByteSource, type SafetensorsModel } from '@splitzip/safetensors';
import { isS3Url, looksLikeOtherUrl, openS3ObjectSource, type S3StoreOptions } from '@splitzip/store';
import { describeError, RuntimeError, isRetryableError } from './errors.js';
import { prefetchSourceHeads } from './prefetch-source-heads.js';
import { checkOptionsArgument, checkS3Arguments, optionNames, quoteBounded } from './check-load-arguments.js';
import { trackSourceRanges, type TrackedSource } from './drop-model-range-copy.js';

export interface OpenModelOptions {
  /** For `s3://` models: the store's S3 settings (retries, concurrency, part size of the ranged GETs, `readThroughDir`). */
  s3?: S3StoreOptions | undefined;
  /**
   * `s3://` models: a per-host directory of fetched ranges (shard heads, the index, uncached tensors),
   * each checked against its own SHA-256 on every read and named by the object's ETag and size, so a
   * replaced object is fetched again; same as `s3.readThroughDir`, and may be the directory given to
   * `openShardCache` (the file names do not collide).
   */
  readThroughDir?: string | undefined;
}

/**
 * Opens a safetensors model from a local path (file, directory, index) or from `s3://bucket/prefix`
 * (a "directory" of shards and, usually, `model.safetensors.index.json`): the objects are read with
 * ranged GETs through `@splitzip/store`'s S3 transport (bounded retries, resumable): one LIST (which
 * gives the sizes and ETags; every GET sends If-Match), then the first HEAD_PREFETCH_BYTES of the index
 * and of every shard fetched at once (larger headers take one more ranged GET), and every tensor's
 * slice identity is the same as for the local copy. With `readThroughDir`, those heads and the
 * tensors read later come from verified local copies once fetched: reopening an unchanged model
 * costs its LIST alone.
 * `MODEL_OPEN_FAILED` wraps the adapter's typed error; an unreachable object store is retryable.
 */
export async function openModel(location: string, options: OpenModelOptions = {}): Promise<SafetensorsModel> {
  if (typeof location !== 'string' || location.length === 0) {
    const got = describeValue(location);
    throw new RuntimeError('INVALID_ARGUMENT', `a model location is a path or an s3:// URL, got ${got}`, { option: 'location', got });
  }
  checkOptionsArgument(options, optionNames<OpenModelOptions>({ s3: true, readThroughDir: true }));
  // Whatever the location (a local model ignores them): a wrong setting is a mistake either way.
  checkS3Arguments(options, 'openModel');
  if (isS3Url(location) && /\.(json|safetensors)$/.test(location)) {
    throw new RuntimeError('INVALID_ARGUMENT', `an s3:// model is the prefix that holds its shards (and index), e.g. ${quoteBounded(location.slice(0, location.lastIndexOf('/') + 1))}, not one of its objects`, {
      location,
    });
  }
  if (looksLikeOtherUrl(location)) {
    throw new RuntimeError('INVALID_ARGUMENT', `${quoteBounded(location)} looks like a URL, but object stores are s3://bucket/prefix (lower case, two slashes)`, { location });
  }
  try {
    // s3 and readThroughDir mean nothing for a local model (loadModel passes modelS3 whatever the location).
    if (!isS3Url(location)) return await openSafetensorsModel(location);
    const s3 = options.readThroughDir !== undefined ? { ...options.s3, readThroughDir: options.readThroughDir } : options.s3;
    const source = trackSourceRanges(openS3ObjectSource(location.endsWith('/') ? location : `${location}/`, s3));
    let model: SafetensorsModel;
    try {
      model = await openFromSource(source);
    } catch (error) {
      if (!s3?.readThroughDir || !isSafetensorsError(error)) {
        await source.close();
        throw error;
      }
      // An index or header that does not parse may be a kept copy of a GET body damaged in transit
      // (its digest only proves it is what came): dropped, and read once more from the object store.
      await source.dropRecordedRanges();
      try {
        model = await openFromSource(source);
        // It parsed when read again: the first bytes were damaged (kept so, or on the way). The
        // tensors' raw ranges have nothing to check them: this open keeps none (S3ObjectSource.reportDamage).
        await source.reportDamage();
      } catch (again) {
        await source.dropRecordedRanges();
        await source.close();
        throw again;
      }
    }
    source.stopRecording();
    source.attachModel(model);
    return model;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    const retryable = isRetryableError(error);
    // The cause names the location already, as a rule (`PATH_NOT_FOUND: <location>: …`): once is enough (a long path read twice).
    const cause = describeError(error).message;
    const message = cause.includes(location) ? `cannot open the model: ${cause}` : `cannot open the model at ${location}: ${cause}`;
    throw new RuntimeError('MODEL_OPEN_FAILED', message, { model: location, causeCode: code, retryable }, { cause: error });
  }
}

/** The model from `source`'s heads (prefetchSourceHeads); a failed open leaves the source open (the caller may read again). */
async function openFromSource(source: TrackedSource): Promise<SafetensorsModel> {
  const prefetched = await prefetchSourceHeads(source);
  let opened = false;
  const owned: ByteSource = {
    url: prefetched.url,
    list: () => prefetched.list(),
    open: (name) => prefetched.open(name),
    close: () => (opened ? prefetched.close?.() : undefined),
  };
  try {
    const model = await openSafetensorsModel({ source: owned, ownsSource: true });
    opened = true;
    return model;
  } finally {
    prefetched.release();
  }
}
