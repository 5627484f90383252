import { createRequire } from 'node:module';
import type * as ClientS3 from '@aws-sdk/client-s3';
import type * as NodeHttp from '@smithy/node-http-handler';

/** The parts of the AWS SDK the store uses: the S3 client and commands, and the Node HTTP handler. */
export interface S3Sdk {
  s3: typeof ClientS3;
  http: typeof NodeHttp;
}

let loading: Promise<S3Sdk> | undefined;

/**
 * Loads the AWS SDK on first use. Its modules take ~0.13 s to load, which every process that only
 * touches local caches (most builds, most loads) would otherwise pay at start-up. They are
 * required, not imported: the SDK ships CommonJS for Node, and `import()` of it ran the ESM
 * loader's format detection and export scan over every file (0.18-0.25 s against 0.12-0.13 s on
 * this project's VMs, paid by every process that opens an s3:// cache).
 */
export function loadS3Sdk(): Promise<S3Sdk> {
  loading ??= new Promise<S3Sdk>((resolve) => {
    const require = createRequire(import.meta.url);
    resolve({ s3: require('@aws-sdk/client-s3') as typeof ClientS3, http: require('@smithy/node-http-handler') as typeof NodeHttp });
  }).catch((error: unknown) => {
    loading = undefined; // a later call may try again
    throw error;
  });
  return loading;
}
