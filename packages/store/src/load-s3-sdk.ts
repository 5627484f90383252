import type * as ClientS3 from '@aws-sdk/client-s3';
import type * as NodeHttp from '@smithy/node-http-handler';

/** The parts of the AWS SDK the store uses: the S3 client and commands, and the Node HTTP handler. */
export interface S3Sdk {
  s3: typeof ClientS3;
  http: typeof NodeHttp;
}

let loading: Promise<S3Sdk> | undefined;

/**
 * Loads the AWS SDK on first use. Its modules take ~0.2 s to load, which every process that only
 * touches local caches (most builds, most loads) would otherwise pay at start-up.
 */
export function loadS3Sdk(): Promise<S3Sdk> {
  loading ??= Promise.all([import('@aws-sdk/client-s3'), import('@smithy/node-http-handler')]).then(
    ([s3, http]) => ({ s3, http }),
    (error: unknown) => {
      loading = undefined; // a later call may try again
      throw error;
    },
  );
  return loading;
}
