// S3 requests that never end (a stalled gateway, a server trickling bytes): the store's signal
// abandons them at once, and requestDeadlineMs bounds each attempt. Local servers, no gateway.
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore, openS3ObjectSource } from '../src/index.js';
import { catchError } from './helpers.js';

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

const credentials = () => {
  process.env.AWS_ACCESS_KEY_ID ??= 'test';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
};

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
});
