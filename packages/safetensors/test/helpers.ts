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
