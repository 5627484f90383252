// A listing must make progress. A server (or a proxy in front of one) that answers every
// ListObjectsV2 with an empty page saying "more follow, continue with token T", or hands back an
// earlier page again, made every open, refresh and gc loop forever; likewise for the multipart
// upload listing. A local HTTP server plays that server here: no gateway needed.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveS3Settings } from '../src/open-cache-store.js';
import { parseS3Url } from '../src/s3-layout.js';
import { MAX_EMPTY_LIST_PAGES, S3Transport } from '../src/s3-transport.js';
import { catchError } from './helpers.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A fake S3 endpoint: `answer(query, requestNumber)` gives the XML body of each GET. */
async function fakeS3(answer: (query: URLSearchParams, n: number) => string): Promise<{ transport: S3Transport; requests: () => number }> {
  let n = 0;
  server = createServer((req, res) => {
    const query = new URL(req.url ?? '/', 'http://x').searchParams;
    res.writeHead(200, { 'content-type': 'application/xml' });
    res.end(answer(query, n++));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  const options = { endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', forcePathStyle: true, maxAttempts: 1 };
  process.env.AWS_ACCESS_KEY_ID ??= 'test';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
  return { transport: new S3Transport(options, parseS3Url('s3://bucket/cache/'), resolveS3Settings(options)), requests: () => n };
}

const page = (keys: string[], token: string | null) =>
  `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bucket</Name><Prefix>cache/</Prefix><KeyCount>${keys.length}</KeyCount><MaxKeys>1000</MaxKeys>` +
  `<IsTruncated>${token !== null}</IsTruncated>${token !== null ? `<NextContinuationToken>${token}</NextContinuationToken>` : ''}` +
  keys.map((key) => `<Contents><Key>${key}</Key><Size>1</Size><LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>`).join('') +
  '</ListBucketResult>';

describe('S3 listings that make no progress', () => {
  it('a token handed back again is S3_ERROR, not an endless loop', async () => {
    const { transport, requests } = await fakeS3(() => page(['cache/blobs/a'], 'T'));
    const error = await catchError(() => transport.list('blobs/'));
    expect(error).toMatchObject({ code: 'S3_ERROR', message: expect.stringMatching(/continuation token it gave before|went backwards/) });
    expect(requests()).toBeLessThanOrEqual(3);
  });

  it('empty truncated pages, each with a new token, end after MAX_EMPTY_LIST_PAGES', async () => {
    const { transport, requests } = await fakeS3((_, n) => page([], `T${n}`));
    const error = await catchError(() => transport.list(''));
    expect(error).toMatchObject({ code: 'S3_ERROR', message: expect.stringContaining('empty pages in a row') });
    expect(requests()).toBe(MAX_EMPTY_LIST_PAGES + 1);
  });

  it('a page that repeats earlier keys is S3_ERROR; an ordinary listing still works', async () => {
    const repeat = await fakeS3((_, n) => page(['cache/a', 'cache/b'], `T${n}`));
    expect(await catchError(() => repeat.transport.list(''))).toMatchObject({ code: 'S3_ERROR', message: expect.stringContaining('went backwards') });
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    const ordinary = await fakeS3((query) => (query.get('continuation-token') === null ? page(['cache/a', 'cache/b'], 'T1') : page(['cache/c'], null)));
    expect((await ordinary.transport.list('')).map((o) => o.name)).toEqual(['a', 'b', 'c']);
  });

  it('multipart upload markers handed back again are S3_ERROR', async () => {
    const { transport, requests } = await fakeS3(
      () =>
        '<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult><Bucket>bucket</Bucket><IsTruncated>true</IsTruncated>' +
        '<NextKeyMarker>cache/x</NextKeyMarker><NextUploadIdMarker>U</NextUploadIdMarker></ListMultipartUploadsResult>',
    );
    expect(await catchError(() => transport.listMultipartUploads())).toMatchObject({ code: 'S3_ERROR', message: expect.stringContaining('markers it gave before') });
    expect(requests()).toBeLessThanOrEqual(3);
  });
});

describe('small objects sent without Content-Length (chunked)', () => {
  it('are read whole up to the limit; beyond it SIZE_INVALID', async () => {
    let size = 40;
    server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(Buffer.alloc(size >> 1, 0x61));
      res.end(Buffer.alloc(size - (size >> 1), 0x62));
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as AddressInfo;
    const options = { endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', forcePathStyle: true, maxAttempts: 1 };
    process.env.AWS_ACCESS_KEY_ID ??= 'test';
    process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
    const transport = new S3Transport(options, parseS3Url('s3://bucket/cache/'), resolveS3Settings(options));
    try {
      expect(Buffer.from((await transport.getSmallObject('cache.json', 50))!).toString()).toBe('a'.repeat(20) + 'b'.repeat(20));
      size = 51;
      expect(await catchError(() => transport.getSmallObject('cache.json', 50))).toMatchObject({ code: 'SIZE_INVALID', details: { limit: 50 } });
    } finally {
      transport.destroy();
    }
  });
});
