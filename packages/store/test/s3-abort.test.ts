// S3 requests that never end (a stalled gateway, a server trickling bytes): the store's signal
// abandons them at once, and requestDeadlineMs bounds each attempt. Local servers, no gateway.
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore, openS3ObjectSource } from '../src/index.js';
import { resolveS3Settings } from '../src/open-cache-store.js';
import { parseS3Url } from '../src/s3-layout.js';
import { S3Transport } from '../src/s3-transport.js';
import { catchError } from './helpers.js';
import { ensureTestCredentials } from './s3-helpers.js';

const servers: Server[] = [];
const sockets = new Set<Socket>();
const httpServers: HttpServer[] = [];
afterEach(async () => {
  for (const server of httpServers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A server that reads requests and answers with `respond` (or never). Resolves its endpoint. */
async function startServer(respond: (socket: Socket) => void): Promise<string> {
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('data', () => respond(socket));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return `http://127.0.0.1:${address.port}`;
}

const credentials = ensureTestCredentials;

describe('S3 requests that never end', () => {
  it("the store's signal abandons a request the server never answers: ABORTED, at once", async () => {
    credentials();
    const endpoint = await startServer(() => undefined); // reads the request, says nothing
    const controller = new AbortController();
    const started = performance.now();
    setTimeout(() => controller.abort(new Error('shutting down')), 300);
    const error = await catchError(() => openCacheStore('s3://bucket/prefix', { s3: { endpoint, signal: controller.signal } }));
    expect(error.code).toBe('ABORTED');
    expect(performance.now() - started).toBeLessThan(5_000);
  }, 20_000);

  it('requestDeadlineMs ends an attempt that trickles bytes (never idle for the socket timeout), then retries and gives up', async () => {
    credentials();
    const endpoint = await startServer((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Type: application/xml\r\n\r\n');
      const timer = setInterval(() => socket.write(' '), 100);
      socket.on('close', () => clearInterval(timer));
    });
    const started = performance.now();
    const error = await catchError(() =>
      openCacheStore('s3://bucket/prefix', { s3: { endpoint, requestDeadlineMs: 400, maxAttempts: 2, retryBaseDelayMs: 1 } }),
    );
    expect(error.code).toBe('S3_UNAVAILABLE');
    expect(error.message).toMatch(/requestDeadlineMs/);
    expect(performance.now() - started).toBeLessThan(5_000);
  }, 20_000);

  it('refuses a requestDeadlineMs that is not a positive integer', async () => {
    for (const requestDeadlineMs of [0, -1, 1.5, Number.NaN]) {
      expect((await catchError(() => openCacheStore('s3://bucket/prefix', { s3: { endpoint: 'http://127.0.0.1:9', requestDeadlineMs } }))).code).toBe('INVALID_ARGUMENT');
    }
  });

  it('a 403 names the usual cause (credentials) instead of an unknown error', async () => {
    credentials();
    const endpoint = await startServer((socket) => socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    const error = await catchError(() => openCacheStore('s3://bucket/prefix', { s3: { endpoint, maxAttempts: 1 } }));
    expect(error.code).toBe('S3_ERROR');
    expect(error.message).toMatch(/access denied: check AWS_ACCESS_KEY_ID/);
  }, 20_000);

  it('requestDeadlineMs counts from the attempt, not from the wait for a concurrency slot: queued requests to a healthy server all succeed', async () => {
    credentials();
    const server = createHttpServer((request, response) => {
      setTimeout(() => {
        response.writeHead(200, { 'Content-Length': '100', ETag: '"abc"', 'Last-Modified': new Date(0).toUTCString() });
        response.end(request.method === 'HEAD' ? undefined : Buffer.alloc(100));
      }, 150);
    });
    httpServers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    // One slot, eight requests of 150 ms: the last waits ~1 s for its slot, beyond the 500 ms deadline.
    const source = openS3ObjectSource('s3://bucket/model/', { endpoint, maxConcurrentRequests: 1, requestDeadlineMs: 500, maxAttempts: 1 });
    try {
      const opened = await Promise.all(Array.from({ length: 8 }, (_, i) => source.open(`shard-${i}.safetensors`)));
      expect(opened.map((object) => object?.sizeBytes)).toEqual(Array(8).fill(100));
    } finally {
      await source.close();
    }
  }, 20_000);
  it('aborting a multipart upload on a stalling server returns promptly: the AbortMultipartUpload cleanup does not wait for the socket timeout', async () => {
    credentials();
    const seen: string[] = [];
    const controller = new AbortController();
    // Starts the upload, then answers nothing: neither the part nor the cleanup's abort. The caller
    // aborts (Ctrl-C) once the part is on its way.
    const server = createHttpServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      seen.push(`${request.method} ${url.search}`);
      request.resume();
      if (request.method === 'PUT') setTimeout(() => controller.abort(new Error('Ctrl-C')), 100);
      if (request.method === 'POST' && url.searchParams.has('uploads')) {
        response.writeHead(200, { 'Content-Type': 'application/xml' });
        response.end('<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>bucket</Bucket><Key>cache/blobs/x</Key><UploadId>U1</UploadId></InitiateMultipartUploadResult>');
      }
    });
    httpServers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const options = { endpoint, region: 'us-east-1', forcePathStyle: true, signal: controller.signal, multipartThresholdBytes: 5 * 2 ** 20 };
    const transport = new S3Transport(options, parseS3Url('s3://bucket/cache/'), resolveS3Settings(options));
    try {
      const started = performance.now();
      const error = await catchError(() => transport.putObject('blobs/x', new Uint8Array(6 * 2 ** 20)));
      expect(error.code).toBe('ABORTED');
      expect(performance.now() - started).toBeLessThan(8_000);
      // The cleanup was sent (and given up on: gc aborts what is left).
      expect(seen.some((line) => line.startsWith('DELETE ?uploadId=U1'))).toBe(true);
    } finally {
      transport.destroy();
    }
  }, 60_000);
});
