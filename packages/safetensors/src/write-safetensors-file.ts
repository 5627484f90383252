import { resolve } from 'node:path';
import { checkOptions } from './check-options.js';
import { WRITER_OPTION_NAMES, createSafetensorsWriter, type SafetensorsWriterOptions } from './create-safetensors-writer.js';
import { checkTensorData } from './check-tensor-data.js';
import type { TensorToWrite } from './types.js';

/**
 * Writes a safetensors file atomically (temp file, fsync, rename, fsync dir): tensors stored in the
 * given order, header padded with spaces to a multiple of 8. Each data length must match shape x dtype.
 * The third argument is either the `__metadata__` object itself (`{ format: 'pt' }`) or, as
 * createSafetensorsWriter takes it, the options `{ metadata: { format: 'pt' } }`: an object whose
 * `metadata` is an object or null is the options form (metadata values are strings, so no metadata
 * object is read that way), and then its other keys are refused as unknown options.
 */
export async function writeSafetensorsFile(
  path: string,
  tensors: readonly TensorToWrite[],
  metadataOrOptions?: Readonly<Record<string, string>> | SafetensorsWriterOptions | null,
): Promise<void> {
  checkTensorData(tensors, typeof path === 'string' ? resolve(path) : String(path));
  const writer = await createSafetensorsWriter(path, tensors, toWriterOptions(metadataOrOptions));
  try {
    for (const tensor of tensors) await writer.write(tensor.data);
    await writer.close();
  } catch (error) {
    await writer.abort();
    throw error;
  }
}

/** The writer's options for either form of writeSafetensorsFile's third argument. */
function toWriterOptions(value: unknown): SafetensorsWriterOptions {
  if (value === undefined || value === null) return { metadata: null };
  if (typeof value === 'object' && Object.prototype.hasOwnProperty.call(value, 'metadata')) {
    const inner: unknown = (value as { metadata?: unknown }).metadata;
    // `{ metadata: 'x' }` is a metadata object of one string: it stays one.
    if (inner === null || inner === undefined || typeof inner === 'object') {
      checkOptions(value, WRITER_OPTION_NAMES, 'writeSafetensorsFile');
      return value as SafetensorsWriterOptions;
    }
  }
  return { metadata: value as Readonly<Record<string, string>> };
}
