import { crc32 } from 'node:zlib';
import { MAX_CHUNK_SIZE, MIN_CHUNK_SIZE } from '@splitzip/codec';
import { describeValue, detailValue } from './describe-value.js';
import { StoreError } from './errors.js';
import { findDuplicateJsonKey } from '@splitzip/safetensors';
import { MANIFEST_FORMAT, MAX_ENTRIES, MAX_GENERATION, MAX_MANIFEST_BYTES } from './limits.js';
import { StoreState } from './store-state.js';
import { StringPool } from './string-pool.js';
import type { CacheEntry } from './types.js';
import { entryToDisk, parseDiskEntry } from './validate-entry.js';

export interface ManifestHeader {
  generation: number;
  chunkSize: number;
  coverageMin: number;
}

export interface ParsedManifest extends ManifestHeader {
  state: StoreState;
}

export function isValidChunkSize(value: unknown): value is number {
  return (
    typeof value === 'number' &&
    Number.isInteger(value) &&
    value >= MIN_CHUNK_SIZE &&
    value <= MAX_CHUNK_SIZE &&
    (value & (value - 1)) === 0
  );
}

export function isValidCoverage(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 1;
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * The manifest's own checksum, its last member: `,"body_crc32":"<8 hex>"}` closes the file, and it
 * is the CRC-32 of the same bytes with that member left out (the text up to it, then `}`). Blobs and
 * journal records carry checksums; without one here, a single flipped digit in a slice key bound it
 * to another tensor of the same size, and that tensor was served the wrong bytes with every check
 * passing. A manifest without the member (written before it existed) is read unchecked; the next
 * compaction writes one.
 */
const CHECKSUM_MEMBER = ',"body_crc32":"';
const CHECKSUM_MEMBER_BYTES = new TextEncoder().encode(CHECKSUM_MEMBER);
const CLOSE_BRACE = new Uint8Array([0x7d]);

function manifestBodyCrc32(bytes: Uint8Array, memberAt: number): string {
  return (crc32(CLOSE_BRACE, crc32(bytes.subarray(0, memberAt))) >>> 0).toString(16).padStart(8, '0');
}

/** Checks the trailing `body_crc32` member where the manifest has one (see CHECKSUM_MEMBER). */
function checkManifestChecksum(bytes: Uint8Array, hasMember: boolean, path: string): void {
  if (!hasMember) return;
  // The member is the last thing in the file: `,"body_crc32":"xxxxxxxx"}`, then only white space
  // (the store writes one newline; an editor or git may have made it CRLF).
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 0x0a || bytes[end - 1] === 0x0d || bytes[end - 1] === 0x20 || bytes[end - 1] === 0x09)) end -= 1;
  const memberAt = end - CHECKSUM_MEMBER_BYTES.length - 8 - 2;
  const inPlace =
    memberAt > 0 &&
    CHECKSUM_MEMBER_BYTES.every((b, i) => bytes[memberAt + i] === b) &&
    bytes[end - 2] === 0x22 &&
    bytes[end - 1] === 0x7d;
  const stated = inPlace ? Buffer.from(bytes.subarray(end - 10, end - 2)).toString('latin1') : '';
  if (!inPlace || !/^[0-9a-f]{8}$/.test(stated)) {
    throw new StoreError('MANIFEST_INVALID', 'body_crc32 must be the manifest\'s last member, 8 lower-case hex digits', { path });
  }
  const actual = manifestBodyCrc32(bytes, memberAt);
  if (actual !== stated) {
    throw new StoreError('MANIFEST_INVALID', `manifest checksum mismatch: body_crc32 says ${stated}, the bytes give ${actual} (damaged on disk, or edited)`, {
      path,
      details: { stated, actual },
    });
  }
}

/** Parses and validates an untrusted manifest.json (every entry, slice uniqueness). */
export function parseManifest(bytes: Uint8Array, path: string): ParsedManifest {
  if (bytes.length > MAX_MANIFEST_BYTES) {
    throw new StoreError('SIZE_INVALID', `manifest is ${bytes.length} bytes, above MAX_MANIFEST_BYTES (${MAX_MANIFEST_BYTES})`, {
      path,
      details: { manifestBytes: bytes.length, limit: MAX_MANIFEST_BYTES },
    });
  }
  let json: unknown;
  let text: string;
  try {
    text = decoder.decode(bytes);
    json = JSON.parse(text);
  } catch (error) {
    throw new StoreError('MANIFEST_INVALID', `manifest is not UTF-8 JSON: ${(error as Error).message}`, { path, cause: error });
  }
  // JSON.parse keeps a repeated key's last value: a second "entries": {} would empty the cache silently.
  const duplicate = findDuplicateJsonKey(text);
  if (duplicate) {
    const where = duplicate.path.length === 0 ? 'at the top level' : `in ${describeValue(duplicate.path.join('.'))}`;
    throw new StoreError('MANIFEST_INVALID', `manifest repeats the key ${describeValue(duplicate.key)} ${where}`, {
      path,
      entry: duplicate.path[0] === 'entries' && duplicate.path.length > 1 ? String(detailValue(duplicate.path[1])) : undefined,
      details: { key: detailValue(duplicate.key), keyPath: duplicate.path.slice(0, 8).map(detailValue), offset: duplicate.position },
    });
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new StoreError('MANIFEST_INVALID', 'manifest must be a JSON object', { path });
  }
  const m = json as Record<string, unknown>;
  checkManifestChecksum(bytes, Object.hasOwn(m, 'body_crc32'), path);
  if (m.format !== MANIFEST_FORMAT) {
    const hint = m.format === 1 ? ' (format 1 is the seed Python manifest, without checksums: rebuild the cache)' : '';
    throw new StoreError('UNSUPPORTED_FORMAT', `manifest format ${describeValue(m.format)} is not ${MANIFEST_FORMAT}${hint}`, {
      path,
      details: { format: detailValue(m.format) },
    });
  }
  const generation = m.generation;
  if (typeof generation !== 'number' || !Number.isInteger(generation) || generation < 1 || generation > MAX_GENERATION) {
    throw new StoreError('MANIFEST_INVALID', `generation must be an integer in 1..${MAX_GENERATION}`, { path, details: { generation: detailValue(generation) } });
  }
  if (!isValidChunkSize(m.chunk_size)) {
    throw new StoreError('MANIFEST_INVALID', 'chunk_size must be a power of two in 64..65536', { path, details: { chunkSize: detailValue(m.chunk_size) } });
  }
  if (!isValidCoverage(m.coverage_min)) {
    throw new StoreError('MANIFEST_INVALID', 'coverage_min must be a number in 0..1', { path, details: { coverageMin: detailValue(m.coverage_min) } });
  }
  const entries = m.entries;
  if (entries === null || typeof entries !== 'object' || Array.isArray(entries)) {
    throw new StoreError('MANIFEST_INVALID', 'entries must be an object keyed by tensor key', { path });
  }
  const keys = Object.keys(entries);
  if (keys.length > MAX_ENTRIES) {
    throw new StoreError('SIZE_INVALID', `manifest lists ${keys.length} entries, above MAX_ENTRIES (${MAX_ENTRIES})`, {
      path,
      details: { entries: keys.length, limit: MAX_ENTRIES },
    });
  }
  const parsed: CacheEntry[] = [];
  // Every binding repeats its shard's name and stamps: one copy of each for the whole manifest.
  const pool = new StringPool();
  for (const key of keys) {
    try {
      parsed.push(parseDiskEntry(key, (entries as Record<string, unknown>)[key], pool));
    } catch (error) {
      throw error instanceof StoreError ? error.withContext({ entry: key, path }) : error;
    }
  }
  const state = StoreState.fromEntries(parsed, { source: 'manifest', path });
  return { generation, chunkSize: m.chunk_size, coverageMin: m.coverage_min, state };
}

/** Serialises the state as a format-2 manifest (the seed's fields first). */
export function serializeManifest(entries: Iterable<CacheEntry>, header: ManifestHeader): Uint8Array {
  const out: Record<string, unknown> = {};
  for (const entry of entries) out[entry.key] = entryToDisk(entry);
  const manifest = {
    format: MANIFEST_FORMAT,
    chunk_size: header.chunkSize,
    coverage_min: header.coverageMin,
    entries: out,
    generation: header.generation,
  };
  const body = new TextEncoder().encode(JSON.stringify(manifest));
  // `{…}` becomes `{…,"body_crc32":"<crc of {…}>"}`: the body without its last byte, the member, `}`.
  const memberAt = body.length - 1;
  const tail = new TextEncoder().encode(`${CHECKSUM_MEMBER}${manifestBodyCrc32(body, memberAt)}"}\n`);
  const file = new Uint8Array(memberAt + tail.length);
  file.set(body.subarray(0, memberAt));
  file.set(tail, memberAt);
  return file;
}

/** The generation of manifest bytes without validating the rest (validation happens on a load); undefined when they do not parse. */
export function peekGeneration(bytes: Uint8Array): number | undefined {
  try {
    const value = (JSON.parse(new TextDecoder().decode(bytes)) as { generation?: unknown } | null)?.generation;
    return typeof value === 'number' ? value : undefined;
  } catch {
    return undefined;
  }
}
