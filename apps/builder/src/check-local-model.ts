import { isS3Url, looksLikeOtherUrl } from '@splitzip/store';
import { UsageError } from './errors.js';
import { checkS3ModelLocation, S3_MODEL_COMMANDS } from './open-builder-model.js';

/**
 * A model location given on the command line, checked before anything is opened. `s3://` models
 * are read from the object store by the commands that take them (`s3Models`: build, verify --model,
 * stats), which check the URL here (the prefix, not one of its objects); the others read local
 * files only, and any URL (an s3:// one was resolved as a relative path and failed as
 * PATH_NOT_FOUND there) is refused, naming the commands that take s3:// models.
 */
export function checkLocalModel(model: string, command: string, option = '<model>', s3Models = false): void {
  // A mistyped s3:// (`S3://`, `s3:/`) gets checkS3ModelLocation's lower-case hint, not "local
  // files"; another scheme (gs://, https://) the download advice below.
  if (s3Models && (isS3Url(model) || (looksLikeOtherUrl(model) && /^s3:/i.test(model)))) {
    try {
      checkS3ModelLocation(model, option);
    } catch (error) {
      throw new UsageError((error as Error).message, command);
    }
    return;
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(model)) {
    const other = isS3Url(model) ? `; ${S3_MODEL_COMMANDS} read s3:// models` : s3Models ? '; s3://bucket/prefix models are read from the object store' : '';
    throw new UsageError(`${option} is read from local files; ${model} is a URL: download the model first${other}`, command);
  }
}
