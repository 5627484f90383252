// Typed errors of the builder. The CLI maps them to one line and an exit code; the library never
// prints. Errors from the other packages (SafetensorsError, StoreError, SplitZipError) pass through
// untouched and are rendered by `describeError`.

export type BuilderErrorCode =
  | 'USAGE' // bad command line: exit 2
  | 'NOT_WRITABLE' // the cache directory cannot be created or written
  | 'NO_SPACE' // the disk filled up while writing the cache
  | 'WORKER_FAILED' // an encode worker died
  | 'OUT_OF_MEMORY' // memory the build needs could not be reserved (a ulimit -v, a container, a large maxInFlightBytes)
  | 'TENSOR_FAILED' // processing one tensor failed (the cause says why)
  | 'SLICE_CONFLICT' // a tensor's slice key is bound to another entry
  | 'MODEL_CHANGED' // a shard file was rewritten while the build read it
  | 'SETTINGS_MISMATCH' // --coverage-min differs from the gate the cache was created with
  | 'CACHE_BEING_CREATED' // verify, inspect, gc: no manifest yet, and a running writer holds the lock (it is creating the cache)
  | 'INTERRUPTED'; // a signal stopped the build

export interface BuilderErrorContext {
  file?: string;
  tensor?: string;
  [key: string]: unknown;
}

// Every copy of this package in a process (its ESM and CommonJS builds, two installs) defines
// its own BuilderError: instances carry this registry symbol so that instanceof holds across copies.
const BRAND: unique symbol = Symbol.for('@splitzip/builder/BuilderError') as never;

export class BuilderError extends Error {
  /** True for a BuilderError from any copy of this package, not only this one. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return this === BuilderError ? (value as { [BRAND]?: unknown } | null | undefined)?.[BRAND] === true : super[Symbol.hasInstance](value);
  }

  readonly code: BuilderErrorCode;
  readonly context: BuilderErrorContext;

  constructor(code: BuilderErrorCode, message: string, context: BuilderErrorContext = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BuilderError';
    this.code = code;
    this.context = context;
  }
}
Object.defineProperty(BuilderError.prototype, BRAND, { value: true });

/** A BuilderError (UsageError included) from any copy of this package; with `code`, of that code. */
export function isBuilderError(value: unknown, code?: BuilderErrorCode): value is BuilderError {
  return value instanceof BuilderError && (code === undefined || value.code === code);
}

const USAGE_BRAND: unique symbol = Symbol.for('@splitzip/builder/UsageError') as never;

/** A command-line mistake: the CLI prints it with a hint to `--help` and exits 2. */
export class UsageError extends BuilderError {
  /** True for a UsageError from any copy of this package, not only this one. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return this === UsageError ? (value as { [USAGE_BRAND]?: unknown } | null | undefined)?.[USAGE_BRAND] === true : super[Symbol.hasInstance](value);
  }

  readonly commandName: string | undefined;

  constructor(message: string, commandName?: string) {
    super('USAGE', message);
    this.name = 'UsageError';
    this.commandName = commandName;
  }
}
Object.defineProperty(UsageError.prototype, USAGE_BRAND, { value: true });
