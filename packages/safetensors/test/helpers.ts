import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SafetensorsError, type SafetensorsErrorCode } from '../src/index.js';
import { createRandom } from '@splitzip/test-support/random';

/** A raw safetensors file from a header text (not validated: for malformed fixtures) and data bytes. */
export function buildRawFile(headerText: string | Uint8Array, data: Uint8Array = new Uint8Array(0), lengthOverride?: bigint): Uint8Array {
  const header = typeof headerText === 'string' ? new TextEncoder().encode(headerText) : headerText;
  const bytes = new Uint8Array(8 + header.length + data.length);
  new DataView(bytes.buffer).setBigUint64(0, lengthOverride ?? BigInt(header.length), true);
  bytes.set(header, 8);
  bytes.set(data, 8 + header.length);
  return bytes;
}

/** Header text from entries, kept in the given order. */
export function headerText(entries: Record<string, unknown>): string {
  return JSON.stringify(entries);
}

export async function withTempDir<T>(run: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'splitzip-st-'));
  try {
    return await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The SafetensorsError a call throws (fails the test on anything else or on no throw). */
export function catchError(run: () => unknown): SafetensorsError {
  try {
    run();
  } catch (error) {
    if (error instanceof SafetensorsError) return error;
    throw new Error(`expected a SafetensorsError, got ${String(error)}`, { cause: error });
  }
  throw new Error('expected a SafetensorsError, nothing was thrown');
}

export async function catchErrorAsync(run: () => Promise<unknown>): Promise<SafetensorsError> {
  try {
    await run();
  } catch (error) {
    if (error instanceof SafetensorsError) return error;
    throw new Error(`expected a SafetensorsError, got ${String(error)}`, { cause: error });
  }
  throw new Error('expected a SafetensorsError, nothing was thrown');
}

export function expectCode(error: SafetensorsError, code: SafetensorsErrorCode): void {
  if (error.code !== code) throw new Error(`expected ${code}, got ${error.code}: ${error.message}`);
}

export { createRandom };

export function randomBytes(random: () => number, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(random() * 256);
  return bytes;
}

const fifos: string[] = [];

/** Makes a FIFO (mkfifo(1)), remembered for unblockFifos(). */
export function makeFifo(path: string): void {
  execFileSync('mkfifo', [path]);
  fifos.push(path);
}

/**
 * Be the writer every FIFO made by makeFifo() waits for (O_RDWR never blocks on Linux), so that an
 * open(2) left blocked on one, in a libuv thread, returns: a failing run must not hang the worker.
 */
export async function unblockFifos(): Promise<void> {
  const fds: number[] = [];
  for (const path of fifos.splice(0)) {
    try {
      fds.push(openSync(path, constants.O_RDWR | constants.O_NONBLOCK));
    } catch {
      // already gone with its temp dir
    }
  }
  if (fds.length === 0) return;
  await new Promise((done) => setTimeout(done, 100));
  for (const fd of fds) closeSync(fd);
}

/** What `promise` gives, or a failure after `ms` (unblocking the FIFOs first: see unblockFifos). */
export async function settlesWithin<T>(promise: Promise<T>, ms = 2000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      void unblockFifos();
      reject(new Error(`did not settle within ${ms} ms (blocked opening a FIFO?)`));
    }, ms);
  });
  try {
    return await Promise.race([promise, hang]);
  } finally {
    clearTimeout(timer);
  }
}
