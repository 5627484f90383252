import { isS3Url, isStoreError, looksLikeOtherUrl, parseS3Url } from '@splitzip/store';
import { UsageError } from './errors.js';

/**
 * A cache location given on the command line, checked before anything is opened or created: one
 * that looks like a URL but is no `s3://` one (`S3://b/p`, `s3:/b/p`, `gs://b`) was created as a
 * local directory `./S3:/b/p` before the store refused it; an `s3://` URL whose bucket name S3
 * refuses was an exit 1 after the model was read. Both are usage errors (exit 2).
 */
export function checkCacheLocation(location: string, command: string, option: string): void {
  if (looksLikeOtherUrl(location)) throw new UsageError(describeUrlLikeLocation(option, location), command);
  if (!isS3Url(location)) return;
  try {
    parseS3Url(location);
  } catch (error) {
    if (!isStoreError(error, 'INVALID_ARGUMENT')) throw error;
    throw new UsageError(`${option} ${location}: ${error.reason}`, command);
  }
}

/** Why a location that looks like a URL but is no s3:// one is refused (the CLI's and buildCache's words). */
export function describeUrlLikeLocation(label: string, location: string): string {
  return `${label} ${location} looks like a URL, but object stores are s3://bucket/prefix (lower case, two slashes); a local directory of that name is refused`;
}
