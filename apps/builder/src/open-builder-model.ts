// Opens the model a command reads: local files (a .safetensors file, a directory, an index), or an
// `s3://bucket/prefix` read as the runtime reads one (apps/runtime open-model.ts): the store's
// object source (one LIST, ranged GETs that send If-Match, settings from the AWS environment) under
// @splitzip/safetensors. Each shard of an s3:// model is stamped `etag:<ETag>` (SafetensorsShard.stamp),
// a stamp of the object's bytes that holds on every host.
import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import { isS3Url, isStoreError, looksLikeOtherUrl, openS3ObjectSource, parseS3Url, StoreError, type S3Object } from '@splitzip/store';
import { BuilderError } from './errors.js';

/** The commands that read an `s3://` model (said where another command refuses one). */
export const S3_MODEL_COMMANDS = 'build, verify --model and stats';

export interface BuilderModel {
  model: SafetensorsModel;
  /**
   * For an `s3://` model: the object a shard is read from (ranged reads bound to the version the
   * model was opened with: a replaced object fails them, OBJECT_CHANGED); undefined for local files.
   */
  openObject?: ((shardName: string) => Promise<S3Object>) | undefined;
}

/**
 * Checks an `s3://` model location before anything is read: it is the prefix that holds the shards,
 * not one object of it (as the runtime says), and its bucket name is one S3 takes. USAGE otherwise.
 */
export function checkS3ModelLocation(location: string, label: string): void {
  if (looksLikeOtherUrl(location)) {
    throw new BuilderError('USAGE', `${label} ${location} looks like a URL, but object stores are s3://bucket/prefix (lower case, two slashes)`, { file: location });
  }
  if (!isS3Url(location)) return;
  if (/\.(json|safetensors)$/.test(location)) {
    throw new BuilderError(
      'USAGE',
      `${label} ${location}: an s3:// model is the prefix that holds its shards (and index), e.g. ${location.slice(0, location.lastIndexOf('/') + 1)}, not one of its objects`,
      { file: location },
    );
  }
  try {
    parseS3Url(location);
  } catch (error) {
    if (!isStoreError(error, 'INVALID_ARGUMENT')) throw error;
    throw new BuilderError('USAGE', `${label} ${location}: ${error.reason}`, { file: location });
  }
}

/**
 * The model at `location`. An `s3://` model's store errors (S3_UNAVAILABLE, S3_ERROR for a missing
 * bucket, ...) keep their code and name the model: the endpoint alone does not say which location
 * of a command (model or cache) failed.
 */
export async function openBuilderModel(location: string, options: { signal?: AbortSignal | undefined; verb?: 'build' | 'verify' | 'stats' } = {}): Promise<BuilderModel> {
  if (!isS3Url(location)) return { model: await openSafetensorsModel(location) };
  checkS3ModelLocation(location, 'the model');
  const prefix = location.endsWith('/') ? location : `${location}/`;
  const source = openS3ObjectSource(prefix, options.signal ? { signal: options.signal } : {});
  let model: SafetensorsModel;
  try {
    model = await openSafetensorsModel({ source, ownsSource: true });
  } catch (error) {
    await source.close();
    // A shard replaced or deleted between the LIST and its header's read: as during the tensors' reads.
    throw describeModelObjectChanged(error, { model: prefix, verb: options.verb }) ?? nameModelInStoreError(error, prefix);
  }
  const openObject = async (shardName: string): Promise<S3Object> => {
    const object = await source.open(shardName).catch((error: unknown) => {
      throw nameModelInStoreError(error, prefix);
    });
    // Listed when the model was opened: its size and ETag are the listing's (no request), and every
    // read sends that ETag as If-Match. Gone only if it was never listed (a shard the model lacks).
    if (object === undefined) {
      throw describeModelObjectChanged(new StoreError('OBJECT_MISSING', `${prefix}${shardName} does not exist`), { model: prefix, file: `${prefix}${shardName}`, verb: 'verify' })!;
    }
    return object;
  };
  return { model, openObject };
}

/** A store error met opening an `s3://` model: the same code (retryable as it was), its message naming the model. */
export function nameModelInStoreError(error: unknown, model: string): unknown {
  if (!isStoreError(error) || error.code === 'ABORTED' || error.reason.includes(model)) return error;
  return new StoreError(error.code, `the model ${model}: ${error.reason}`, { ...(error.path ? { path: error.path } : {}), details: { ...error.details, model }, cause: error });
}

/**
 * OBJECT_CHANGED / OBJECT_MISSING of an `s3://` model's object (a shard replaced or deleted while it
 * was read: its If-Match GET failed): MODEL_CHANGED, saying so; `undefined` for any other error.
 * What a build committed before stays valid (every entry is checked against its bytes' key).
 */
export function describeModelObjectChanged(error: unknown, context: { model?: string | undefined; file?: string | undefined; tensor?: string | undefined; verb?: string | undefined }): BuilderError | undefined {
  if (!isStoreError(error) || (error.code !== 'OBJECT_CHANGED' && error.code !== 'OBJECT_MISSING')) return undefined;
  const file = context.file ?? error.path;
  const what = error.code === 'OBJECT_MISSING' ? 'deleted' : 'replaced (another ETag or size)';
  return new BuilderError(
    'MODEL_CHANGED',
    `MODEL_CHANGED: the model changed while being read: ${file ?? 'a shard object'} was ${what} after the ${context.verb ?? 'build'} opened it` +
      `${context.tensor === undefined ? '' : ` (reading tensor ${context.tensor})`}; ` +
      (context.verb === undefined || context.verb === 'build' ? 'entries committed so far stay valid: run the build again once the model is no longer being written' : `run ${context.verb} again once the model is no longer being written`),
    { file, ...(context.tensor === undefined ? {} : { tensor: context.tensor }), ...(context.model === undefined ? {} : { model: context.model }) },
    { cause: error },
  );
}
