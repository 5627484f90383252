import { UsageError } from './errors.js';

/**
 * The builder reads models from local files (a cache may be s3://, a model may not): an s3://
 * location given as a model was resolved as a relative path and failed as PATH_NOT_FOUND there.
 */
export function checkLocalModel(model: string, command: string, option = '<model>'): void {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(model)) {
    throw new UsageError(`${option} is read from local files; ${model} is a URL: download the model first (the runtime loads s3:// models)`, command);
  }
}
