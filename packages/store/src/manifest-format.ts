import { crc32 } from 'node:zlib';
import { MAX_CHUNK_SIZE, MIN_CHUNK_SIZE } from '@splitzip/codec';
import { describeValue, detailValue } from './describe-value.js';
import { bindingRuleOf } from './slice-bindings.js';
import { StoreError } from './errors.js';
import { findDuplicateJsonKey, scanJsonValue } from '@splitzip/safetensors';
import type { BindingsPerFile } from './slice-bindings.js';
import { MANIFEST_FORMAT, MANIFEST_FORMAT_OBJECT_BINDINGS, MANIFEST_FORMAT_ONE_BINDING, MAX_ENTRIES, MAX_GENERATION, MAX_MANIFEST_BYTES, READABLE_PAYLOAD_VERSIONS } from './limits.js';
import { StoreState } from './store-state.js';
import { StringPool } from './string-pool.js';
import type { CacheEntry } from './types.js';
import { entryToDisk, parseDiskEntry } from './validate-entry.js';

export interface ManifestHeader {
  /** The manifest's format as read (2, or 3 once a slice holds a second binding); serializeManifest picks its own from the state. */
  format?: number | undefined;
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
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch (error) {
    throw new StoreError('MANIFEST_INVALID', `manifest is not valid UTF-8: ${(error as Error).message}`, { path, cause: error });
  }
  // Anything odd (an error to report included) is left to the whole-tree parse, which says what.
  return parseManifestInPieces(text, bytes, path) ?? parseManifestTree(text, bytes, path);
}

/** Text that decoded as UTF-8 but does not parse (a file cut off part way, an empty one): JSON, not its encoding, is what is wrong. */
function notJson(error: unknown, path: string): StoreError {
  return new StoreError('MANIFEST_INVALID', `manifest is not valid JSON: ${(error as Error).message}`, { path, cause: error });
}

/** The manifest parsed as one JSON tree, with every check in order: the reference, and what reports a problem. */
export function parseManifestTree(text: string, bytes: Uint8Array, path: string): ParsedManifest {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw notJson(error, path);
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
  const header = checkManifestHeader(m, bytes, path);
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
      throw error instanceof StoreError ? asManifestDamage(error.withContext({ entry: key, path }), path) : error;
    }
  }
  let state: StoreState;
  try {
    state = StoreState.fromEntries(parsed, { source: 'manifest', path }, bindingsPerFileOfManifest(header.format));
  } catch (error) {
    throw error instanceof StoreError ? asManifestDamage(error, path) : error;
  }
  return { ...header, state };
}

/** The codes one entry (or two entries' bindings) of a manifest fails with: damage confined to it. */
const ENTRY_DAMAGE_CODES: ReadonlySet<string> = new Set([
  'ENTRY_INVALID',
  'INVALID_CODEBOOK',
  'UNSUPPORTED_PAYLOAD_VERSION',
  'UNSAFE_BLOB_PATH',
  'SIZE_INVALID',
  'SLICE_CONFLICT',
  'SLICE_SIZE_MISMATCH',
]);

/**
 * The one payload version read as a newer release's, not damage: versions go up one at a time (as
 * journal versions: MAX_NEWER_JOURNAL_VERSION), and payload 3 came without a new manifest format,
 * so such an entry is kept from recoverDamagedManifest. Any other unreadable version (0, 7: one
 * flipped bit of 3, a string) is damage.
 */
const NEWER_PAYLOAD_VERSION = Math.max(...READABLE_PAYLOAD_VERSIONS) + 1;

/** An entry's UNSUPPORTED_PAYLOAD_VERSION naming the version after the newest readable: a newer release's, not damage (manifest or journal). */
export function isNewerPayloadVersion(error: unknown): boolean {
  if (!(error instanceof StoreError) || error.code !== 'UNSUPPORTED_PAYLOAD_VERSION') return false;
  return (error.details.formatVersion ?? error.details.version) === NEWER_PAYLOAD_VERSION;
}

/**
 * An entry of a manifest that passed its checksum (or has none: pre-checksum manifests) but fails
 * its own checks: MANIFEST_INVALID (`details.reason` 'entry-invalid', `details.entryCode` the
 * entry's own code, `cause` its error), which recoverDamagedManifest (`build --repair`) salvages,
 * keeping every entry that validates and decodes to its key. Before 2026-12-07 the entry's own code
 * was thrown, which no recovery took for damage: one bad value (an escape_count, a shape, a blob
 * path, a swapped binding) made the cache unopenable by every tool (fuzz probe). A newer release's
 * payload version stays UNSUPPORTED_PAYLOAD_VERSION (upgrade: nothing to repair).
 */
function asManifestDamage(error: StoreError, path: string): StoreError {
  if (!ENTRY_DAMAGE_CODES.has(error.code)) return error;
  if (isNewerPayloadVersion(error)) {
    return new StoreError('UNSUPPORTED_PAYLOAD_VERSION', `${error.reason}: written by a newer release (upgrade this one to read the cache)`, {
      path,
      ...(error.entry === undefined ? {} : { entry: error.entry }),
      details: { ...error.details, newerRelease: true },
    });
  }
  return new StoreError('MANIFEST_INVALID', `manifest entry fails its checks (${error.code}: ${error.reason}): damage confined to it, which recoverDamagedManifest salvages (every other entry that checks out is kept)`, {
    path,
    ...(error.entry === undefined ? {} : { entry: error.entry }),
    // A binding breaking the rule of one binding per file: which rule (SLICE_CONFLICT details.reason).
    details: { ...error.details, reason: 'entry-invalid', entryCode: error.code, ...bindingRuleOf(error, 'entryReason') },
    cause: error,
  });
}

/** The checksum and the header's fields of a parsed manifest object (not its entries). */
function checkManifestHeader(m: Record<string, unknown>, bytes: Uint8Array, path: string): ManifestHeader & { format: number } {
  checkManifestChecksum(bytes, Object.hasOwn(m, 'body_crc32'), path);
  if (m.format !== MANIFEST_FORMAT && m.format !== MANIFEST_FORMAT_ONE_BINDING && m.format !== MANIFEST_FORMAT_OBJECT_BINDINGS) {
    const hint =
      m.format === 1
        ? ' (format 1 is the seed Python manifest, without checksums: rebuild the cache)'
        : m.format === MANIFEST_FORMAT_OBJECT_BINDINGS + 1
          ? ' (written by a newer release: upgrade this one to read the cache)'
          : '';
    throw new StoreError('UNSUPPORTED_FORMAT', `manifest format ${describeValue(m.format)} is not ${MANIFEST_FORMAT_ONE_BINDING}, ${MANIFEST_FORMAT} or ${MANIFEST_FORMAT_OBJECT_BINDINGS}${hint}`, {
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
  return { format: m.format, generation, chunkSize: m.chunk_size, coverageMin: m.coverage_min };
}

/**
 * The manifest read a piece at a time: each entry's text is parsed on its own (JSON.parse of its
 * slice), validated and added, so its tree dies young. One JSON tree of a 49 MB manifest (64,000
 * entries) lived through the whole parse: ~0.8 s to build it and most of the ~1.4 s of garbage
 * collection an open spent. The text between the pieces (braces, keys, colons, commas, white space)
 * is checked here, every object's keys are checked for repeats (scanJsonValue; entry keys by the
 * state's map), and every piece parses: so the text is JSON, and the pieces hold what the whole tree
 * would. Undefined at the first thing that does not fit (invalid JSON, a repeated or escaped key, an
 * entry or header that fails a check, a slice conflict, too many entries): parseManifestTree then
 * runs every check in its order and reports the problem as it always did.
 */
export function parseManifestInPieces(text: string, bytes: Uint8Array, path: string): ParsedManifest | undefined {
  try {
    const members: Record<string, unknown> = {};
    let state: StoreState | undefined;
    let i = skipJsonWhiteSpace(text, 0);
    if (text.charCodeAt(i) !== 0x7b /* { */) return undefined;
    i = skipJsonWhiteSpace(text, i + 1);
    for (;;) {
      const keyEnd = plainKeyEnd(text, i);
      if (keyEnd < 0) return undefined;
      const name = text.slice(i + 1, keyEnd);
      if (Object.hasOwn(members, name) || name === '__proto__' || (name === 'entries' && state !== undefined)) return undefined;
      i = skipJsonWhiteSpace(text, keyEnd + 1);
      if (text.charCodeAt(i) !== 0x3a /* : */) return undefined;
      i = skipJsonWhiteSpace(text, i + 1);
      if (name === 'entries') {
        // `format` comes first (serializeManifest): a format-3 manifest's slices may hold several
        // bindings. Anything else is judged strictly here, and by the tree parse where that fails.
        const read = readEntriesInPieces(text, i, path, bindingsPerFileOfManifest(members.format));
        if (read === undefined) return undefined;
        state = read.state;
        i = read.end;
      } else {
        const scan = scanJsonValue(text, i);
        if (scan.duplicate) return undefined;
        members[name] = JSON.parse(text.slice(i, scan.end));
        i = scan.end;
      }
      i = skipJsonWhiteSpace(text, i);
      const c = text.charCodeAt(i);
      if (c === 0x7d /* } */) break;
      if (c !== 0x2c /* , */) return undefined;
      i = skipJsonWhiteSpace(text, i + 1);
    }
    if (skipJsonWhiteSpace(text, i + 1) !== text.length || state === undefined) return undefined;
    const header = checkManifestHeader(members, bytes, path);
    // Second bindings read as a format-3 manifest's: only valid in one.
    if (state.holdsSecondBindings && header.format === MANIFEST_FORMAT_ONE_BINDING) return undefined;
    if (state.holdsObjectBindingsBeside && header.format !== MANIFEST_FORMAT_OBJECT_BINDINGS) return undefined;
    return { ...header, state };
  } catch {
    return undefined;
  }
}

/** The `entries` object starting at `start` ({), each entry parsed, validated and added as read; undefined as for parseManifestInPieces. */
function readEntriesInPieces(text: string, start: number, path: string, bindingsPerFile: BindingsPerFile): { state: StoreState; end: number } | undefined {
  if (text.charCodeAt(start) !== 0x7b /* { */) return undefined;
  const state = new StoreState();
  const context = { source: 'manifest', path };
  const pool = new StringPool();
  let i = skipJsonWhiteSpace(text, start + 1);
  if (text.charCodeAt(i) === 0x7d /* } */) return { state, end: i + 1 };
  for (;;) {
    // A plain key, as the store writes them (one that is not 40 hex digits fails parseDiskEntry).
    // Parsed, not sliced: a slice of the text kept as the entry's key would keep all of the text alive.
    const keyEnd = plainKeyEnd(text, i);
    if (keyEnd < 0) return undefined;
    const key = JSON.parse(text.slice(i, keyEnd + 1)) as string;
    i = skipJsonWhiteSpace(text, keyEnd + 1);
    if (text.charCodeAt(i) !== 0x3a /* : */) return undefined;
    i = skipJsonWhiteSpace(text, i + 1);
    const scan = scanJsonValue(text, i);
    // Too many entries: addLoadedEntry throws, and the tree parse reports it.
    if (scan.duplicate || state.entries.has(key)) return undefined;
    state.addLoadedEntry(parseDiskEntry(key, JSON.parse(text.slice(i, scan.end)), pool), context, bindingsPerFile);
    i = skipJsonWhiteSpace(text, scan.end);
    const c = text.charCodeAt(i);
    if (c === 0x7d /* } */) return { state, end: i + 1 };
    if (c !== 0x2c /* , */) return undefined;
    i = skipJsonWhiteSpace(text, i + 1);
  }
}

function skipJsonWhiteSpace(text: string, from: number): number {
  let i = from;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
    i += 1;
  }
}

/** The closing quote of the key string at `start`, or -1 where it is not a plain one (no escape, no control character). */
function plainKeyEnd(text: string, start: number): number {
  if (text.charCodeAt(start) !== 0x22 /* " */) return -1;
  for (let i = start + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) return i;
    if (c === 0x5c /* \ */ || c < 0x20) return -1;
  }
  return -1;
}

/**
 * The format a manifest of `state` is written in: 3 only once a slice holds a second binding (older
 * releases read 2), 4 only once one holds an object's binding beside another (releases up to 0.57 read 3).
 */
export function manifestFormatFor(state: { readonly holdsSecondBindings: boolean; readonly holdsObjectBindingsBeside?: boolean }): number {
  if (state.holdsObjectBindingsBeside === true) return MANIFEST_FORMAT_OBJECT_BINDINGS;
  return state.holdsSecondBindings ? MANIFEST_FORMAT : MANIFEST_FORMAT_ONE_BINDING;
}

/** Which bindings a manifest of `format` may hold beside others. */
function bindingsPerFileOfManifest(format: unknown): BindingsPerFile {
  return format === MANIFEST_FORMAT_OBJECT_BINDINGS ? 'objects' : format === MANIFEST_FORMAT;
}

/**
 * Serialises entries as a manifest of `format` (manifestFormatFor: 2, byte for byte what 0.55.0
 * wrote, until a slice holds a second binding; the seed's fields first). SIZE_INVALID, before a
 * byte is written, for one the reader would refuse (above MAX_MANIFEST_BYTES: the cache never
 * opened again, and recoverDamagedManifest could not help) or V8 cannot build (a RangeError).
 */
export function serializeManifest(entries: Iterable<CacheEntry>, header: ManifestHeader, format: number = MANIFEST_FORMAT_ONE_BINDING): Uint8Array {
  const out: Record<string, unknown> = {};
  for (const entry of entries) out[entry.key] = entryToDisk(entry);
  const manifest = {
    format,
    chunk_size: header.chunkSize,
    coverage_min: header.coverageMin,
    entries: out,
    generation: header.generation,
  };
  let body: Uint8Array;
  try {
    body = new TextEncoder().encode(JSON.stringify(manifest));
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw manifestTooLarge(undefined, error);
  }
  // The body's closing `}` gives way to CHECKSUM_MEMBER, 8 hex digits, `"}` and a newline.
  const fileBytes = body.length - 1 + CHECKSUM_MEMBER.length + 11;
  if (fileBytes > MAX_MANIFEST_BYTES) throw manifestTooLarge(fileBytes);
  // `{…}` becomes `{…,"body_crc32":"<crc of {…}>"}`: the body without its last byte, the member, `}`.
  const memberAt = body.length - 1;
  const tail = new TextEncoder().encode(`${CHECKSUM_MEMBER}${manifestBodyCrc32(body, memberAt)}"}\n`);
  const file = new Uint8Array(memberAt + tail.length);
  file.set(body.subarray(0, memberAt));
  file.set(tail, memberAt);
  return file;
}

/** SIZE_INVALID for a manifest this package would write and then refuse to read (`bytes` undefined: too long for a string). */
export function manifestTooLarge(bytes: number | undefined, cause?: unknown): StoreError {
  const size = bytes === undefined ? 'longer than a JavaScript string can hold' : `${bytes} bytes`;
  return new StoreError(
    'SIZE_INVALID',
    `the manifest would be ${size}, above MAX_MANIFEST_BYTES (${MAX_MANIFEST_BYTES}), which no reader opens: not written (unbind slices, or use another cache)`,
    { details: { ...(bytes === undefined ? {} : { manifestBytes: bytes }), limit: MAX_MANIFEST_BYTES }, cause },
  );
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
