import { describeValue, findUnknownOption } from '@splitzip/codec/internal';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { checkS3Options, isStoreError, MAX_REFRESH_INTERVAL_MS } from '@splitzip/store';
import { RuntimeError } from './errors.js';

/**
 * Shape checks of what a loader passes in, so that a wrong object is INVALID_ARGUMENT naming the
 * option, not a TypeError from deep inside a load (or a silently ignored setting). Structural: a
 * wrapper with the same methods is accepted, as the loaders' own test doubles are.
 */

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object') return typeof value;
  try {
    return (value as object).constructor?.name ?? 'object';
  } catch {
    return 'object'; // a Proxy whose get trap throws: still INVALID_ARGUMENT, not the trap's error
  }
}

/**
 * INVALID_ARGUMENT for an option of the wrong type or value, the value shown as the codec's
 * describeValue shows it (`got string "false"`, `got object {"a":1}`, bounded whatever its size:
 * the format of every package's argument messages; `String(value)` of a 16M-item array made a
 * message of that size), in `details.got` too; `details.type` is its class or typeof.
 */
export function argumentError(option: string, expected: string, value: unknown, hint = ''): RuntimeError {
  const got = describeValue(value);
  return new RuntimeError('INVALID_ARGUMENT', `${option} must be ${expected}, got ${got}${hint}`, { option, type: kindOf(value), got });
}

/** A caller's string quoted and cut as describeValue shows it, without its `string ` prefix. */
export function quoteBounded(text: string): string {
  return describeValue(text).slice('string '.length);
}

/** A caller's string cut as describeValue cuts it, unquoted (a name in running text); anything else as describeValue shows it. */
export function cutBounded(text: unknown): string {
  return typeof text === 'string' ? describeValue(text).slice('string "'.length, -1) : describeValue(text);
}

function hasMethods(value: unknown, methods: readonly string[]): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const object = value as Record<string, unknown>;
  try {
    return methods.every((method) => typeof object[method] === 'function');
  } catch {
    return false; // a Proxy whose get trap throws is no handle: INVALID_ARGUMENT, not the trap's error
  }
}

/** The option names of an options type, checked complete by the compiler (the codec's optionNamesOf). */
export { optionNamesOf as optionNames } from '@splitzip/codec/internal';

/**
 * An options argument: an object (the default `{}` covers undefined) and, given `known`, with no
 * other own keys. A misspelt option (`verfyDigest`, `cacheonly`) was ignored, the load ran with
 * the default, and nothing said so; a cache handle passed where the options go
 * (`loadTensor(request, cache)`) loaded every tensor raw.
 */
export function checkOptionsArgument(options: unknown, known?: readonly string[]): void {
  if (typeof options !== 'object' || options === null) {
    throw argumentError('options', 'an object', options);
  }
  if (known === undefined) return;
  let unknown: ReturnType<typeof findUnknownOption>;
  try {
    unknown = findUnknownOption(options, known);
  } catch {
    // Its keys cannot be read (a Proxy whose ownKeys or get trap throws).
    throw new RuntimeError('INVALID_ARGUMENT', 'options must be a plain object whose keys can be read (reading them threw)', { option: 'options' });
  }
  if (unknown !== undefined) {
    const { key, near } = unknown;
    const handle = hasMethods(options, ['lookup', 'readBlob']) ? ' (this looks like a cache handle: pass it as the cache option, { cache })' : '';
    throw new RuntimeError(
      'INVALID_ARGUMENT',
      `unknown option ${quoteBounded(key)}${near === undefined ? '' : `: did you mean ${JSON.stringify(near)}?`}${handle} (known: ${known.join(', ')})`,
      { option: key, known: [...known] },
    );
  }
}

/** A boolean flag, or undefined: a string 'false' is true to an `if`, and turned verification on. */
export function checkBooleanArgument(value: unknown, option: string): void {
  if (value !== undefined && typeof value !== 'boolean') {
    throw argumentError(option, 'true or false', value);
  }
}

/**
 * A ShardCache (openShardCache), or null / undefined for none. `optionsOf`: the options of the
 * call whose positional cache this is (loadModel's): an object holding one of them is the options
 * passed a place early (`loadModel(model, { cache })`), and the message says so.
 */
export function checkCacheArgument(cache: unknown, option = 'cache', optionsOf?: { call: string; known: readonly string[] }): void {
  if (cache === undefined || cache === null) return;
  if (!hasMethods(cache, ['lookup', 'lookupSliceBinding', 'readBlob', 'refresh', 'largestPayloadBytes', 'borrowStagingPool'])) {
    const looksLikeOptions = optionsOf !== undefined && hasOwnKeyOf(cache, optionsOf.known);
    const hint = looksLikeOptions ? ` (this looks like ${optionsOf.call}'s options: pass them third, ${optionsOf.call}(model, cache, options), with null for the cache to load raw)` : '';
    throw argumentError(option, 'a cache handle from openShardCache (or null)', cache, hint);
  }
}

/** Whether `value` is an object with an own key among `keys` (false where its keys cannot be read). */
function hasOwnKeyOf(value: unknown, keys: readonly string[]): boolean {
  if (typeof value !== 'object' || value === null) return false;
  try {
    return keys.some((key) => Object.prototype.hasOwnProperty.call(value, key));
  } catch {
    return false; // a Proxy whose trap throws
  }
}

/** A model from openSafetensorsModel / openModel. */
export function checkModelArgument(model: unknown, option = 'model'): asserts model is SafetensorsModel {
  // A location is what loadModel takes (it opens and closes the model for its one load): say what
  // a single-tensor call takes instead, rather than only "got string".
  if (typeof model === 'string') {
    throw new RuntimeError(
      'INVALID_ARGUMENT',
      `${option} must be an open model, got the location ${quoteBounded(model)}: open it once with \`await openModel(${quoteBounded(model)})\` (or openSafetensorsModel), pass that to every load, and close it when done (only loadModel takes a location, opening and closing the model for that one load)`,
      { option, type: 'string', location: model },
    );
  }
  if (!hasMethods(model, ['getTensor', 'findBySlice']) || !Array.isArray((model as { tensors?: unknown }).tensors)) {
    throw argumentError(option, 'a model from openSafetensorsModel or openModel', model);
  }
}

/** A StagingPool (createStagingPool / cache.createStagingPool), or undefined. */
export function checkPoolArgument(pool: unknown): void {
  if (pool === undefined) return;
  if (!hasMethods(pool, ['acquire', 'tryAcquire', 'release'])) {
    throw argumentError('pool', 'a staging pool from createStagingPool', pool);
  }
}

/** A ByteReader (createFileReader, createPacedReader, or one with the same methods), or undefined unless `required`. */
export function checkReaderArgument(reader: unknown, option = 'reader', required = false): void {
  if (reader === undefined && !required) return;
  // readExact is what a load calls (close is the owner's to call, and the README's ByteReader is
  // readExact alone): a reader of that one method worked before this check and still does.
  if (!hasMethods(reader, ['readExact'])) {
    throw argumentError(option, 'a ByteReader (with readExact, e.g. createFileReader())', reader);
  }
}

/** An AbortSignal (or one that behaves as one: `aborted` and `addEventListener`), or undefined. */
export function checkSignalArgument(signal: unknown): void {
  if (signal === undefined) return;
  const s = signal as { aborted?: unknown; addEventListener?: unknown; removeEventListener?: unknown } | null;
  if (typeof s !== 'object' || s === null || typeof s.aborted !== 'boolean' || typeof s.addEventListener !== 'function' || typeof s.removeEventListener !== 'function') {
    throw argumentError('signal', 'an AbortSignal', signal);
  }
}

/** A callback option, or undefined. */
export function checkFunctionArgument(value: unknown, option: string): void {
  if (value !== undefined && typeof value !== 'function') {
    throw argumentError(option, 'a function', value);
  }
}

/** A byte count option: a number >= 0 (Infinity allowed where documented), or undefined. */
export function checkByteCountArgument(value: unknown, option: string, { allowInfinity = true } = {}): void {
  if (value === undefined) return;
  const ok = typeof value === 'number' && value >= 0 && (Number.isSafeInteger(value) || (allowInfinity && value === Infinity));
  if (!ok) {
    throw argumentError(option, `a whole number of bytes >= 0${allowInfinity ? ' (or Infinity)' : ''}`, value);
  }
}

/** A coverage gate: a number in [0, 1], or undefined. */
export function checkCoverageArgument(value: unknown, option = 'coverageMin'): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !(value >= 0 && value <= 1)) {
    throw argumentError(option, 'a number in 0..1', value);
  }
}

/** OpenShardCacheOptions.objectSources or fileSources: 'check', 'trust', or not given. */
export function checkSourcePolicyArgument(value: unknown, option: 'objectSources' | 'fileSources'): void {
  if (value === undefined || value === 'check' || value === 'trust') return;
  throw argumentError(option, "'check' or 'trust'", value);
}

/** A slice's offset or size: a whole number of bytes >= 0. */
export function checkSliceNumber(value: unknown, field: 'offsetBytes' | 'sizeBytes'): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    const got = describeValue(value);
    throw new RuntimeError('INVALID_ARGUMENT', `a slice's ${field} must be a whole number >= 0, got ${got}`, { field, type: kindOf(value), got });
  }
}

/**
 * `cacheOnly` with no cache (absent or null): INVALID_ARGUMENT at the call. Every tensor of such a
 * load failed NOT_CACHED "(no cache)" one by one, as if the cache lacked it.
 */
export function checkCacheOnlyHasCache(cacheOnly: unknown, cache: unknown, where: string): void {
  if (cacheOnly === true && (cache === undefined || cache === null)) {
    throw new RuntimeError('INVALID_ARGUMENT', `cacheOnly needs a cache: ${where} (without one every tensor is read raw, which cacheOnly forbids)`, { option: 'cacheOnly', cache: cache === null ? 'null' : 'undefined' });
  }
}

/**
 * `s3` and `readThroughDir` of openModel and openShardCache, before anything is opened: the
 * store's own check of S3 settings (checkS3Options, which openCacheStore and openS3ObjectSource
 * run; one rule for every call that takes them), its refusal as the runtime's INVALID_ARGUMENT
 * naming the option. openModel ignored `s3: { endpont }` (the load went to AWS), took `s3: 5` and
 * `readThroughDir: 5`, and passed `endpoint: 5` to the AWS SDK (which printed to stderr).
 */
export function checkS3Arguments(options: { s3?: unknown; readThroughDir?: unknown }, call: 'openModel' | 'openShardCache'): void {
  if (options.readThroughDir !== undefined && typeof options.readThroughDir !== 'string') {
    throw argumentError('readThroughDir', 'a directory path (a string)', options.readThroughDir);
  }
  if (options.s3 === undefined) return;
  try {
    checkS3Options(options.s3, call);
  } catch (error) {
    if (!isStoreError(error, 'INVALID_ARGUMENT')) throw error;
    const { option, expected, value, known, suggestion } = error.details as { option?: unknown; expected?: unknown; value?: unknown; known?: unknown; suggestion?: unknown };
    // The store leads with the call's name: the runtime's messages lead with the option (`s3.endpoint must be …`, `unknown option …`).
    const message = error.reason.startsWith(`${call}: `) ? error.reason.slice(call.length + 2) : error.reason;
    // The caller's value itself (the store's details keep a long string or an object as text).
    const key = typeof option === 'string' && option.startsWith('s3.') ? option.slice(3) : undefined;
    const shown = option === 's3' ? options.s3 : key !== undefined ? (options.s3 as Record<string, unknown>)[key] : value;
    const got = known === undefined ? { type: kindOf(shown), got: describeValue(shown) } : {};
    // Composed from the store's details, the value as every runtime message shows it (the store's
    // describeValue words it otherwise): cutting the store's text at ', got ' cut inside a value holding it.
    const shownMessage = typeof option === 'string' && typeof expected === 'string' && got.got !== undefined ? `${option} must be ${expected}, got ${got.got}` : message;
    throw new RuntimeError('INVALID_ARGUMENT', shownMessage, { option, ...got, ...(known === undefined ? {} : { known }), ...(suggestion === undefined ? {} : { suggestion }) }, { cause: error });
  }
}

/** openShardCache's refreshIntervalMs (the store's rule, MAX_REFRESH_INTERVAL_MS), or undefined. */
export function checkRefreshIntervalArgument(value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !(value > 0 && value <= MAX_REFRESH_INTERVAL_MS)) {
    throw argumentError('refreshIntervalMs', `a number of milliseconds > 0 and <= ${MAX_REFRESH_INTERVAL_MS} (MAX_REFRESH_INTERVAL_MS, Node's timer limit)`, value);
  }
}

