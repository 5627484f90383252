import { createRequire } from 'node:module';
import type * as ClientS3 from '@aws-sdk/client-s3';
import type * as NodeHttp from '@smithy/node-http-handler';
import type { Agent as HttpAgent } from 'node:http';
import type { Agent as HttpsAgent } from 'node:https';

/**
 * The parts of the AWS SDK the store uses: the S3 client and commands, and the Node HTTP handler;
 * with Node's own HTTP(S) agent classes, loaded here too: `node:http` and `node:https` took ~5 ms
 * of every process's start-up when imported at the top of the transport, local caches included.
 */
export interface S3Sdk {
  s3: typeof ClientS3;
  http: typeof NodeHttp;
  agents: { HttpAgent: typeof HttpAgent; HttpsAgent: typeof HttpsAgent };
}

/**
 * The SDK packages s3:// needs, with the ranges this package declares them as optional peer
 * dependencies (package.json; a test keeps the two equal). Not dependencies: ~22 MB that every
 * install of a local-cache user downloaded for nothing.
 */
export const S3_SDK_PACKAGES = {
  '@aws-sdk/client-s3': '^3.1175.0',
  '@smithy/node-http-handler': '^4.14.2',
} as const;

/** What to run where the SDK is missing (quoted: `^` is special to some shells). */
export const S3_SDK_INSTALL_COMMAND = `npm i ${Object.entries(S3_SDK_PACKAGES)
  .map(([name, range]) => `"${name}@${range}"`)
  .join(' ')}`;

/** Whether loading the SDK failed because a package of it is not installed (not a broken install). */
export function isSdkMissing(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND';
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
    resolve({
      s3: require('@aws-sdk/client-s3') as typeof ClientS3,
      http: require('@smithy/node-http-handler') as typeof NodeHttp,
      agents: { HttpAgent: (require('node:http') as { Agent: typeof HttpAgent }).Agent, HttpsAgent: (require('node:https') as { Agent: typeof HttpsAgent }).Agent },
    });
  }).catch((error: unknown) => {
    loading = undefined; // a later call may try again
    throw error;
  });
  return loading;
}
