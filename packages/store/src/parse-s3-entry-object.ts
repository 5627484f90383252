// The checks an s3:// entry object's bytes pass before anything trusts them (README "S3 layout"):
// UTF-8 JSON with no repeated field, a valid entry of the key in its name, the blob SHA-256 of its
// name, no slice keys. Shared by the reads of entries/ and by drops, which PUT an entry's bytes as
// an intent object and may put them back from one (a damaged intent is reported, never put back).
import { findDuplicateJsonKey } from '@splitzip/safetensors';
import { describeValue, detailValue } from './describe-value.js';
import { StoreError } from './errors.js';
import { parseEntryObjectName } from './s3-layout.js';
import type { CacheEntry } from './types.js';
import { parseDiskEntry } from './validate-entry.js';

const decoder = new TextDecoder('utf-8', { fatal: true });

/** The entry `bytes` hold as the object `name` (an entries/ name), and its JSON; ENTRY_INVALID (`path` named) when they fail a check. */
export function parseS3EntryObject(name: string, bytes: Uint8Array, path: string): { entry: CacheEntry; json: Record<string, unknown> } {
  const parsedName = parseEntryObjectName(name);
  if (!parsedName) throw new StoreError('ENTRY_INVALID', `unrecognised object ${path} below entries/`, { path });
  let json: unknown;
  let text: string;
  try {
    text = decoder.decode(bytes);
    json = JSON.parse(text);
  } catch (error) {
    throw new StoreError('ENTRY_INVALID', `entry object is not UTF-8 JSON: ${(error as Error).message}`, { entry: parsedName.key, path });
  }
  // A repeated field would be taken silently (the last one): refused, as in manifest.json.
  const duplicate = findDuplicateJsonKey(text);
  if (duplicate) {
    throw new StoreError('ENTRY_INVALID', `entry object repeats the key ${describeValue(duplicate.key)}`, {
      entry: parsedName.key,
      path,
      details: { key: detailValue(duplicate.key), keyPath: duplicate.path.slice(0, 8).map(detailValue), offset: duplicate.position },
    });
  }
  const entry = parseDiskEntry(parsedName.key, json);
  if (entry.blobSha256 !== parsedName.blobSha256) {
    throw new StoreError('ENTRY_INVALID', 'blob_sha256 differs from the one in the object name', { entry: parsedName.key, path });
  }
  if (entry.sliceKeys.length > 0) throw new StoreError('ENTRY_INVALID', 'entry objects carry no slice keys (they are alias objects)', { entry: parsedName.key, path });
  return { entry, json: json as Record<string, unknown> };
}
