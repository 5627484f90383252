import { StoreError } from './errors.js';
import { MAX_ENTRIES, MAX_GENERATION, MIN_ENTRY_TEXT_BYTES } from './limits.js';
import { isValidChunkSize, isValidCoverage } from './manifest-format.js';
import type { CacheEntry } from './types.js';
import { parseDiskEntry } from './validate-entry.js';

/** What could be read out of a damaged manifest.json (salvageManifest). */
export interface SalvagedManifest {
  /** The top-level fields, each where it still reads as a valid value (undefined otherwise). */
  generation: number | undefined;
  chunkSize: number | undefined;
  coverageMin: number | undefined;
  /**
   * Every entry whose own text still parses and validates, WITHOUT its slice bindings: the damage
   * cannot be located (the checksum covers the whole file), and a changed digit in a binding's
   * offset binds a slice to another tensor of the same size, so no binding is trusted. Candidates
   * only: the caller checks each against its blob (decoded, content key recomputed) before use.
   */
  entries: CacheEntry[];
  /** Keys of entry texts found that did not parse or validate, or that were found twice. */
  unreadableEntries: string[];
  /** Slice bindings the salvaged entries listed, all dropped. */
  droppedBindings: number;
}

/** An entry member as the store writes it: `"<40 hex>":{`. Inside a JSON string a quote is escaped, so this matches only structure. */
const ENTRY_START = /"([0-9a-f]{40})"\s*:\s*\{/g;

/**
 * Reads what can be trusted as a candidate out of manifest bytes that failed their checks, entry by
 * entry: each `"<key>":{…}` member is cut out and parsed alone, so that damage in one entry costs
 * that entry only (a flipped bit inside a value, a quote or brace lost). Entries are written one
 * after another, so one ends before the next one's key: each scan stops there, and the whole pass
 * reads every character at most twice, whatever the bytes (`stats.scannedChars` counts the
 * characters the entry scans read). A key found twice (damage gave one entry
 * another's key) keeps neither. The top-level settings come from JSON.parse of the whole text when
 * it still parses, else from where the store writes them. Throws only MANIFEST_INVALID, for bytes
 * holding more entry starts than entries of the store's could fill (MIN_ENTRY_TEXT_BYTES each):
 * no manifest of ours, and salvaging millions of fake ones ran out of memory.
 */
export function salvageManifest(bytes: Uint8Array, stats?: { scannedChars: number }): SalvagedManifest {
  // Not fatal: a damaged byte becomes U+FFFD inside its own entry, and the rest still reads.
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  const header = readSettings(text);
  const maxStarts = Math.min(MAX_ENTRIES, Math.ceil(text.length / MIN_ENTRY_TEXT_BYTES));
  const unreadable = new Set<string>();
  const entries = new Map<string, CacheEntry>();
  const seen = new Set<string>();
  let droppedBindings = 0;
  let starts = 0;
  ENTRY_START.lastIndex = 0;
  // Each start is found when the one before it is read (its scan stops there): one at a time.
  let next = ENTRY_START.exec(text);
  while (next !== null) {
    const match = next;
    if (++starts > maxStarts) {
      throw new StoreError('MANIFEST_INVALID', `more than ${maxStarts} entry starts in ${bytes.length} bytes: not a manifest the store wrote, nothing to salvage (move the cache aside and build again)`, {
        details: { starts, bytes: bytes.length },
      });
    }
    const key = match[1]!;
    const open = match.index + match[0].length - 1;
    next = ENTRY_START.exec(text);
    const limit = next === null ? text.length : next.index;
    const close = findObjectEnd(text, open, limit);
    // (Counted for the test that holds the pass linear: each scan ends by the next entry's key.)
    if (stats) stats.scannedChars += (close ?? limit - 1) - open + 1;
    const value = close === undefined ? undefined : parseObject(text.slice(open, close + 1));
    let entry: CacheEntry | undefined;
    let bindings = 0;
    try {
      // Its bindings are dropped anyway: damage confined to them costs the entry nothing (it did).
      if (value !== undefined && Array.isArray(value.slice_keys)) bindings = value.slice_keys.length;
      entry = value === undefined ? undefined : parseDiskEntry(key, { ...value, slice_keys: [] });
    } catch {
      entry = undefined;
    }
    if (seen.has(key)) {
      // Listed twice: neither copy is trusted over the other (the one kept before goes too).
      entries.delete(key);
      unreadable.add(key);
      continue;
    }
    seen.add(key);
    if (entry === undefined) {
      unreadable.add(key);
      continue;
    }
    droppedBindings += bindings;
    entries.set(key, entry);
  }
  const generation = header.generation;
  return {
    generation: typeof generation === 'number' && Number.isInteger(generation) && generation >= 1 && generation <= MAX_GENERATION ? generation : undefined,
    chunkSize: isValidChunkSize(header.chunk_size) ? header.chunk_size : undefined,
    coverageMin: isValidCoverage(header.coverage_min) ? header.coverage_min : undefined,
    entries: [...entries.values()],
    unreadableEntries: [...unreadable],
    droppedBindings,
  };
}

/**
 * The three settings, from JSON.parse of the whole text when it still parses, else where the store
 * writes them. A function of its own so that the parsed manifest (objects several times the text's
 * size) is garbage before the entry pass: held in salvageManifest's frame, it stayed alive to the end.
 */
function readSettings(text: string): Record<string, unknown> {
  const whole = parseObject(text);
  return whole ? { generation: whole.generation, chunk_size: whole.chunk_size, coverage_min: whole.coverage_min } : readHeaderMembers(text);
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The top-level members of a manifest whose text no longer parses: the store writes `format`,
 * `chunk_size`, `coverage_min` before `entries` and `generation` after it (serializeManifest), and
 * entry objects hold neither a `coverage_min` nor a `generation`. Each is read where it stands.
 */
function readHeaderMembers(text: string): Record<string, unknown> {
  const members: Record<string, unknown> = {};
  const head = /^\{"format":\d+,"chunk_size":(\d{1,6}),"coverage_min":([0-9.eE+-]{1,32}),"entries":\{/.exec(text);
  if (head) {
    members.chunk_size = Number(head[1]);
    members.coverage_min = Number(head[2]);
  }
  // The last `"generation":N` of the file (after every entry); entries have no such member.
  const tail = /"generation":(\d{1,10})[,}][^"]*(?:"body_crc32":"[0-9a-f]{8}"\}\s*)?$/.exec(text);
  if (tail) members.generation = Number(tail[1]);
  return members;
}

/**
 * The index of the `}` that closes the object opening at `open`, skipping strings (with their
 * escapes), looking no further than `limit`; undefined when it is not closed before.
 */
function findObjectEnd(text: string, open: number, limit: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = open; i < limit; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return c === 0x7d ? i : undefined;
    }
  }
  return undefined;
}
