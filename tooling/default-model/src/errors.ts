export type DefaultModelErrorCode =
  | 'SOURCE_NOT_FOUND'
  | 'TFJS_INVALID_MANIFEST'
  | 'TFJS_UNSUPPORTED_DTYPE'
  | 'TFJS_UNSUPPORTED_QUANTIZATION'
  | 'TFJS_SIZE_MISMATCH'
  | 'INVALID_OPTION'
  | 'UNSUPPORTED_PLATFORM';

/** The one error type of this package (safetensors problems surface as SafetensorsError). */
export class DefaultModelError extends Error {
  readonly code: DefaultModelErrorCode;
  readonly file?: string;
  readonly tensor?: string;

  constructor(code: DefaultModelErrorCode, message: string, context: { file?: string; tensor?: string; cause?: unknown } = {}) {
    const where = [context.file, context.tensor !== undefined ? `weight ${JSON.stringify(context.tensor)}` : undefined].filter(Boolean).join(', ');
    super(`${code}: ${where ? `${where}: ` : ''}${message}`, context.cause !== undefined ? { cause: context.cause } : undefined);
    this.name = 'DefaultModelError';
    this.code = code;
    if (context.file !== undefined) this.file = context.file;
    if (context.tensor !== undefined) this.tensor = context.tensor;
  }
}
