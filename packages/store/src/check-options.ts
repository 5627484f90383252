// Up-front checks of the options objects (and option-like items) the store's calls take, so that
// a misspelt key or a value of the wrong kind is INVALID_ARGUMENT naming the option, before
// anything is read or written: `gc({ dryrun: true })` ran a real gc that deleted files,
// `verify({ signal: {} })` reported every blob as IO_ERROR damage, `verify(null)` was a bare
// TypeError. Only undefined means "the default": null is a value, refused where an option takes
// none. The near name comes from the codec's findClosestName, the one "did you mean" of the
// packages. A call's options are checked once per call (a for-in over a small literal); a batch's item
// fields with each item's other checks, which cost far more (a payload's checksum, a slice key).
import { findUnknownOption, optionNamesOf } from '@splitzip/codec/internal';
import { describeValue, detailValue } from './describe-value.js';
import { StoreError } from './errors.js';
import type { RecoverDamagedManifestOptions } from './recover-damaged-manifest.js';
import type {
  AddEntryInput,
  AliasSliceItem,
  AliasSlicesOptions,
  GcOptions,
  OpenCacheStoreOptions,
  ReadBlobOptions,
  S3StoreOptions,
  UnbindSliceItem,
  VerifyOptions,
} from './types.js';

/** An options argument: an object (undefined, where the caller may leave it out, is handled before: a default `= {}`). */
export function checkOptionsObject(options: unknown, call: string, argument = 'options'): asserts options is object {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new StoreError('INVALID_ARGUMENT', `${call}: ${argument} must be an object or undefined, got ${describeValue(options)}`, {
      details: { option: argument, expected: 'an object or undefined', value: detailValue(options) },
    });
  }
}

/** No own key outside `known` (a known key set to undefined is fine); `path` prefixes nested options' names (`s3.`). */
export function checkOptionKeys(options: object, known: readonly string[], call: string, path = '', noun = 'option'): void {
  const unknown = findUnknownOption(options, known);
  if (unknown === undefined) return;
  const { key, near } = unknown;
  const hint = near === undefined ? '' : `: did you mean "${path}${near}"?`;
  throw new StoreError('INVALID_ARGUMENT', `${call}: unknown ${noun} "${path}${key}"${hint} (known: ${known.join(', ')})`, {
    details: { option: `${path}${key}`, known: [...known], ...(near === undefined ? {} : { suggestion: `${path}${near}` }) },
  });
}

/** A flag: true, false or undefined (the string 'false' is true to an `if`). */
export function checkBooleanOption(value: unknown, option: string, call: string): void {
  if (value === undefined || typeof value === 'boolean') return;
  throw invalidOption(call, option, 'true or false', value);
}

/** A callback, or undefined. */
export function checkFunctionOption(value: unknown, option: string, call: string): void {
  if (value === undefined || typeof value === 'function') return;
  throw invalidOption(call, option, 'a function', value);
}

/** An AbortSignal (by shape: one from another realm or a polyfill counts), or undefined. */
export function checkSignalOption(value: unknown, option: string, call: string): void {
  if (value === undefined) return;
  const signal = value as { aborted?: unknown; addEventListener?: unknown } | null;
  if (typeof signal === 'object' && signal !== null && typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function') return;
  throw invalidOption(call, option, 'an AbortSignal', value);
}

function invalidOption(call: string, option: string, expected: string, value: unknown): StoreError {
  return new StoreError('INVALID_ARGUMENT', `${call}: ${option} must be ${expected} or undefined, got ${describeValue(value)}`, {
    // expected: for a caller rewording the message (the runtime shows values its own way).
    details: { option, expected: `${expected} or undefined`, value: detailValue(value) },
  });
}

const VERIFY_OPTIONS = optionNamesOf<VerifyOptions>({ decode: true, onProgress: true, signal: true });

/** verify's options (both stores). */
export function checkVerifyOptions(options: unknown): asserts options is VerifyOptions {
  checkOptionsObject(options, 'verify');
  checkOptionKeys(options, VERIFY_OPTIONS, 'verify');
  const { decode, onProgress, signal } = options as VerifyOptions;
  checkBooleanOption(decode, 'decode', 'verify');
  checkFunctionOption(onProgress, 'onProgress', 'verify');
  checkSignalOption(signal, 'signal', 'verify');
}

const GC_OPTIONS = optionNamesOf<GcOptions>({ dryRun: true, minAgeMs: true });

/**
 * gc's options, before anything is removed: `gc({ dryrun: true })` (misspelt) or `gc({ dryRun:
 * 'true' })` ran a real gc that deleted files. `extra`: a store's own names (the S3 store's test switch).
 */
export function checkGcOptions(options: unknown, extra: readonly string[] = []): asserts options is GcOptions {
  checkOptionsObject(options, 'gc');
  checkOptionKeys(options, extra.length === 0 ? GC_OPTIONS : [...GC_OPTIONS, ...extra], 'gc');
  checkBooleanOption((options as GcOptions).dryRun, 'dryRun', 'gc');
}

const OPEN_OPTIONS = optionNamesOf<OpenCacheStoreOptions>({
  create: true,
  coverageMin: true,
  chunkSize: true,
  lockTimeoutMs: true,
  refreshIntervalMs: true,
  compactOnClose: true,
  signal: true,
  s3: true,
  sliceBindingsPerFile: true,
});
const S3_OPTIONS = optionNamesOf<S3StoreOptions>({
  client: true,
  endpoint: true,
  region: true,
  forcePathStyle: true,
  createBucket: true,
  maxConcurrentRequests: true,
  partSizeBytes: true,
  multipartThresholdBytes: true,
  maxAttempts: true,
  retryBaseDelayMs: true,
  retryMaxDelayMs: true,
  requestTimeoutMs: true,
  requestDeadlineMs: true,
  signal: true,
  connectTimeoutMs: true,
  readThroughDir: true,
});

/** openCacheStore's options (`s3` too, where given: directories ignore its values, not its spelling). Numbers and compactOnClose are checked where they are read. */
export function checkOpenOptions(options: unknown): asserts options is OpenCacheStoreOptions {
  const call = 'openCacheStore';
  checkOptionsObject(options, call);
  checkOptionKeys(options, OPEN_OPTIONS, call);
  const { create, signal, s3, sliceBindingsPerFile } = options as OpenCacheStoreOptions;
  checkBooleanOption(create, 'create', call);
  checkBooleanOption(sliceBindingsPerFile, 'sliceBindingsPerFile', call);
  checkSignalOption(signal, 'signal', call);
  if (s3 !== undefined) checkS3Options(s3, call);
}

/**
 * S3StoreOptions (openCacheStore's `s3`, openS3ObjectSource's options, and the runtime's openModel
 * and openShardCache before either): an object of known keys (`s3.endpont` went unnoticed and the
 * requests went to AWS), its flags true or false, its strings strings (`endpoint: 5` failed inside
 * the AWS SDK, which printed to stderr). `argument`: 's3' names keys `s3.<key>`; 'options' names them bare.
 * Numbers are checked where they are read (resolveS3Settings).
 */
export function checkS3Options(s3: unknown, call: string, argument: 's3' | 'options' = 's3'): asserts s3 is S3StoreOptions {
  const path = argument === 's3' ? 's3.' : '';
  checkOptionsObject(s3, call, argument);
  checkOptionKeys(s3, S3_OPTIONS, call, path);
  const options = s3 as S3StoreOptions;
  checkBooleanOption(options.forcePathStyle, `${path}forcePathStyle`, call);
  checkBooleanOption(options.createBucket, `${path}createBucket`, call);
  checkSignalOption(options.signal, `${path}signal`, call);
  for (const key of ['endpoint', 'region', 'readThroughDir'] as const) {
    const value = options[key];
    if (value !== undefined && typeof value !== 'string') throw invalidOption(call, `${path}${key}`, 'a string', value);
  }
}

const RECOVER_OPTIONS = optionNamesOf<RecoverDamagedManifestOptions>({ lockTimeoutMs: true, signal: true, onProgress: true });

/** recoverDamagedManifest's options (lockTimeoutMs is checked where it is read). */
export function checkRecoverOptions(options: unknown): asserts options is RecoverDamagedManifestOptions {
  const call = 'recoverDamagedManifest';
  checkOptionsObject(options, call);
  checkOptionKeys(options, RECOVER_OPTIONS, call);
  const { signal, onProgress } = options as RecoverDamagedManifestOptions;
  checkSignalOption(signal, 'signal', call);
  checkFunctionOption(onProgress, 'onProgress', call);
}

const READ_BLOB_OPTIONS = optionNamesOf<ReadBlobOptions>({ verifyChecksum: true });

/**
 * readBlob's (readBlobSync's, an opened blob's finish's) options, before the read. Called per
 * tensor: a for-in over a one-key literal, nothing allocated; undefined is not looked at.
 */
export function checkReadBlobOptions(options: unknown, call: string): void {
  if (options === undefined) return;
  checkOptionsObject(options, call);
  checkOptionKeys(options, READ_BLOB_OPTIONS, call);
  checkBooleanOption((options as ReadBlobOptions).verifyChecksum, 'verifyChecksum', call);
}

const ALIAS_OPTIONS = optionNamesOf<AliasSlicesOptions>({ rebind: true, onBindingDropped: true, onBesideRefused: true });

/** aliasSlices' options. */
export function checkAliasOptions(options: unknown): asserts options is AliasSlicesOptions {
  checkOptionsObject(options, 'aliasSlices');
  checkOptionKeys(options, ALIAS_OPTIONS, 'aliasSlices');
  checkBooleanOption((options as AliasSlicesOptions).rebind, 'rebind', 'aliasSlices');
  checkFunctionOption((options as AliasSlicesOptions).onBindingDropped, 'onBindingDropped', 'aliasSlices');
  checkFunctionOption((options as AliasSlicesOptions).onBesideRefused, 'onBesideRefused', 'aliasSlices');
}

const ADD_ENTRY_FIELDS = optionNamesOf<AddEntryInput>({
  key: true,
  qualname: true,
  payload: true,
  shape: true,
  dtype: true,
  sha256: true,
  sliceKeys: true,
  payloadDigest: true,
  recordBlobSha256: true,
  onPayloadWritten: true,
  leaveTakenSlices: true,
});
const ALIAS_ITEM_FIELDS = optionNamesOf<AliasSliceItem>({ key: true, shardName: true, offsetBytes: true, sizeBytes: true, stamp: true, moveFrom: true, besideOnlyIfSeveral: true });
const UNBIND_ITEM_FIELDS = optionNamesOf<UnbindSliceItem>({ shardName: true, offsetBytes: true, sizeBytes: true, key: true });

/**
 * An addEntries input's field names and flags (called by prepareAddEntry, once per item, with the
 * item's other checks): `slicekeys` committed the entry with its slices unbound.
 */
export function checkAddEntryFields(input: object): void {
  const call = 'addEntries';
  checkOptionKeys(input, ADD_ENTRY_FIELDS, call, '', 'field');
  const { recordBlobSha256, leaveTakenSlices } = input as AddEntryInput;
  checkBooleanOption(recordBlobSha256, 'recordBlobSha256', call);
  checkBooleanOption(leaveTakenSlices, 'leaveTakenSlices', call);
}

/** The field names of a batch's items (aliasSlices, unbindSlices), item by item: `movefrom` made a conditional alias a plain one. */
export function checkItemFields(items: readonly object[], method: 'aliasSlices' | 'unbindSlices'): void {
  const known = method === 'aliasSlices' ? ALIAS_ITEM_FIELDS : UNBIND_ITEM_FIELDS;
  for (let i = 0; i < items.length; i++) checkOptionKeys(items[i]!, known, `${method} item ${i}`, '', 'field');
  if (method === 'aliasSlices') for (let i = 0; i < items.length; i++) checkBooleanOption((items[i] as AliasSliceItem).besideOnlyIfSeveral, 'besideOnlyIfSeveral', `aliasSlices item ${i}`);
}
