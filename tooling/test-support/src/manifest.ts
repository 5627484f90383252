// Tests write damaged or hostile manifests on purpose. A store manifest ends with its own checksum
// (`,"body_crc32":"<8 hex>"}`: the CRC-32 of the same text without that member); an edited manifest
// written with it is read as such, so the test reaches the check it aims at instead of the checksum.
import { writeFile } from 'node:fs/promises';
import { crc32 } from 'node:zlib';

/** A manifest's JSON text (an object, without a `body_crc32` member) with a matching one added last. */
export function signManifestText(body: string): string {
  const trimmed = body.trimEnd();
  if (!trimmed.endsWith('}')) throw new Error('a manifest is a JSON object');
  const crc = (crc32(Buffer.from(trimmed, 'utf8')) >>> 0).toString(16).padStart(8, '0');
  return `${trimmed.slice(0, -1)},"body_crc32":"${crc}"}\n`;
}

/** `manifest` as a store writes it: its members in order, then a `body_crc32` member that matches. */
export function serializeSignedManifest(manifest: Record<string, unknown>): string {
  const { body_crc32: _dropped, ...rest } = manifest;
  return signManifestText(JSON.stringify(rest));
}

/** Writes `manifest` to `path` with a matching checksum (see serializeSignedManifest). */
export async function writeSignedManifest(path: string, manifest: Record<string, unknown>): Promise<void> {
  await writeFile(path, serializeSignedManifest(manifest));
}
