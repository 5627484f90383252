// A proxy on 127.0.0.1 in front of the gateway, for the S3 tests that inject faults into single
// requests or replies (a 404, a reply cut short, a garbled body).
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { endpoint } from './s3-helpers.js';

export interface FaultProxy {
  url: string;
  close(): Promise<void>;
}

/** A forwarding proxy; `onRequest` may answer a request itself (true) or let it through. */
export async function startProxy(onRequest: (req: IncomingMessage, res: ServerResponse) => boolean): Promise<FaultProxy> {
  const upstream = new URL(endpoint!);
  const proxy = createServer((req, res) => {
    if (onRequest(req, res)) return;
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    forward.on('error', () => req.socket.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as { port: number }).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections();
        proxy.close(() => resolve());
      }),
  };
}

/**
 * Forwards a request to the gateway and hands its reply (headers and whole body) to `edit` before
 * sending it on, in two writes: without a content-length header Node sends it chunked.
 */
export function relay(req: IncomingMessage, res: ServerResponse, edit: (headers: Record<string, string | string[] | undefined>, body: Buffer) => Buffer): void {
  const upstream = new URL(endpoint!);
  const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
    const chunks: Buffer[] = [];
    up.on('data', (chunk: Buffer) => chunks.push(chunk));
    up.on('end', () => {
      const headers: Record<string, string | string[] | undefined> = { ...up.headers };
      delete headers['transfer-encoding'];
      const body = edit(headers, Buffer.concat(chunks));
      res.writeHead(up.statusCode ?? 502, headers);
      const half = body.length >> 1;
      res.write(body.subarray(0, half));
      res.end(body.subarray(half));
    });
  });
  forward.on('error', () => req.socket.destroy());
  req.pipe(forward);
}

/** `relay` with the body cut to its first `keepBytes` and a content-length that says so (a reply cut short, undetectable by length). */
export function relayCut(req: IncomingMessage, res: ServerResponse, keepBytes: number): void {
  relay(req, res, (headers, body) => {
    const cut = body.subarray(0, keepBytes);
    headers['content-length'] = String(cut.length);
    return cut;
  });
}

/** An S3-style XML error reply. */
export function answerError(res: ServerResponse, status: number, code: string): void {
  const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>injected</Message></Error>`;
  res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
