// Fixtures for the size limits, shared by the builder's and the runtime's suites.
import { open, readFile } from 'node:fs/promises';
import { writeSignedManifest } from './manifest.js';
import { computePayloadLayout, MAX_ELEMENT_COUNT } from '@splitzip/codec';

/**
 * A safetensors file of BF16 tensors (name, value count) whose data is a hole: sparse, so a tensor of
 * gigabytes takes no disk space and reads as zeros.
 */
export async function writeSparseSafetensors(path: string, tensors: ReadonlyArray<readonly [string, number]>): Promise<void> {
  const header: Record<string, unknown> = {};
  let offsetBytes = 0;
  for (const [name, values] of tensors) {
    header[name] = { dtype: 'BF16', shape: [values], data_offsets: [offsetBytes, offsetBytes + 2 * values] };
    offsetBytes += 2 * values;
  }
  const text = JSON.stringify(header);
  const json = Buffer.from(text.padEnd(Math.ceil(text.length / 8) * 8));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  const handle = await open(path, 'w');
  try {
    await handle.write(Buffer.concat([length, json]));
    await handle.truncate(8 + json.length + offsetBytes);
  } finally {
    await handle.close();
  }
}

/**
 * Adds to `cacheDir`'s manifest.json an entry consistent in itself (the store opens it) for the most
 * values a payload holds, with no blob: its comp_bytes (19.6 GB) is more than any buffer or staging
 * slot can be. Returns its key and comp_bytes.
 */
export async function addOversizedManifestEntry(cacheDir: string): Promise<{ key: string; compBytes: number }> {
  const n = MAX_ELEMENT_COUNT;
  const compBytes = computePayloadLayout(n, n, 64).totalBytes;
  const key = 'b'.repeat(40);
  const manifestPath = `${cacheDir}/manifest.json`;
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as { entries: Record<string, unknown> };
  manifest.entries[key] = {
    qualname: 'oversized',
    blob: `blobs/${key}.bin`,
    codebook: { exponents: [127] },
    meta: { version: 3, element_count: n, chunk_size: 64, chunk_count: Math.ceil(n / 64), escape_count: n, comp_bytes: compBytes, raw_bytes: 2 * n, checksum: 1 },
    raw_bytes: 2 * n,
    slice_keys: [],
    dtype: 'BF16',
    shape: [n],
    format_version: 3,
    comp_bytes: compBytes,
    blob_checksum: 'xxh32:00000001',
  };
  await writeSignedManifest(manifestPath, manifest);
  return { key, compBytes };
}
