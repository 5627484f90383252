// An s3:// cache opened with no credentials anywhere: the SDK fails before any request with
// "Could not load credentials from any providers", which names nothing to set. The store's
// S3_ERROR says what to set. No gateway needed: the SDK never gets as far as the endpoint.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isStoreError, openCacheStore } from '../src/index.js';

const saved = { ...process.env };

beforeEach(() => {
  for (const name of Object.keys(process.env)) if (name.startsWith('AWS_')) delete process.env[name];
  // No instance metadata lookup (a network wait on machines outside EC2), no profile files.
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  process.env.AWS_CONFIG_FILE = '/nonexistent/splitzip-test/config';
  process.env.AWS_SHARED_CREDENTIALS_FILE = '/nonexistent/splitzip-test/credentials';
  process.env.AWS_ENDPOINT_URL = 'http://127.0.0.1:9';
  process.env.AWS_REGION = 'us-east-1';
});

afterEach(() => {
  for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
  Object.assign(process.env, saved);
});

describe('an s3:// cache without credentials', () => {
  it('fails with S3_ERROR naming the variables to set', async () => {
    const error = await openCacheStore('s3://splitzip-no-credentials/prefix', { create: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isStoreError(error, 'S3_ERROR')).toBe(true);
    const message = (error as Error).message;
    expect(message).toContain('CredentialsProviderError');
    expect(message).toContain('no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
    expect(message).toContain('AWS_ENDPOINT_URL');
  });
});
