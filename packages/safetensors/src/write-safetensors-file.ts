import { resolve } from 'node:path';
import { createSafetensorsWriter } from './create-safetensors-writer.js';
import { checkTensorData } from './check-tensor-data.js';
import type { TensorToWrite } from './types.js';

/**
 * Writes a safetensors file atomically (temp file, fsync, rename, fsync dir): tensors stored in the
 * given order, header padded with spaces to a multiple of 8. Each data length must match shape x dtype.
 */
export async function writeSafetensorsFile(path: string, tensors: readonly TensorToWrite[], metadata?: Readonly<Record<string, string>> | null): Promise<void> {
  checkTensorData(tensors, typeof path === 'string' ? resolve(path) : String(path));
  const writer = await createSafetensorsWriter(path, tensors, { metadata: metadata ?? null });
  try {
    for (const tensor of tensors) await writer.write(tensor.data);
    await writer.close();
  } catch (error) {
    await writer.abort();
    throw error;
  }
}
